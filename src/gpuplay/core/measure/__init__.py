"""Measurement helpers: statistics, noise verdicts, roofs, telemetry, energy, traces and profiles."""
