"""Studies made of many measurements: comparisons side by side, crossover sweeps, the live session."""
