"""gpuplay: an interactive GPU playground for numerical Python, timed honestly."""

__version__ = "0.1.0"
