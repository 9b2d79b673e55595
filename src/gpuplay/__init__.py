"""gpuplay: an interactive GPU playground for numerical Python, timed honestly.

From Python: `gpuplay.run`, `compare`, `sweep`, `measure` and `load` (docs/python-api.md). The
names are loaded on first use (PEP 562), so `import gpuplay` stays cheap: it imports neither
torch nor the terminal UI. In Jupyter, `%load_ext gpuplay` adds the %gpuplay magics.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# The package's public names, listed here only: api.__all__ is these less the two defined here.
__all__ = [
    "Comparison",
    "Ladder",
    "MeasurementError",
    "Refused",
    "Result",
    "Results",
    "Sweep",
    "Table",
    "__version__",
    "compare",
    "load",
    "load_ipython_extension",
    "measure",
    "run",
    "sweep",
    "tune",
]

_API = frozenset(__all__) - {"__version__", "load_ipython_extension"}


def __getattr__(name: str) -> object:  # typing is not imported here: 50 ms cold
    if name in _API:
        # import_module, not an import statement: the package's face must not tie every module that
        # reads __version__ (the core among them) to the API above it. Types: __init__.pyi.
        return getattr(importlib.import_module("gpuplay.api"), name)
    raise AttributeError(f"module 'gpuplay' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext gpuplay`: the %gpuplay line magic and the %%gpuplay cell magic."""
    importlib.import_module("gpuplay.notebook").load_ipython_extension(ipython)
