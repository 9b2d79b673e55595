"""The workload registry: every computation gpuplay can time, by name."""

from __future__ import annotations

import functools
import sys

from gpuplay.core.workloads.base import Param, Workload, relative_error

# Every built-in workload's name and the module under gpuplay.core.workloads that defines it (in
# its WORKLOADS), in the registry's order. A workload's module is imported the first time it is
# named: the engine measuring a matmul imports linalg, not the other eleven.
# tests/unit/test_own_speed_round4.py checks this table against the modules themselves.
WORKLOAD_MODULES: dict[str, str] = {
    "matmul": "linalg",
    "batched_matmul": "linalg",
    "svd": "linalg",
    "eigh": "linalg",
    "solve": "linalg",
    "lstsq": "linalg",
    "elementwise": "pointwise",
    "reductions": "pointwise",
    "fft1d": "spectral",
    "fft2d": "spectral",
    "heat": "pde",
    "autograd": "autodiff",
    "attention": "attention",
    "inference": "inference",
    "transfers": "transfers",
    "fused": "fused",
    "sparse": "sparse",
    "scan": "scan",
    "dataloader": "dataloader",
}


@functools.cache
def _builtin(name: str) -> Workload:
    """The one instance of built-in workload `name`, its module imported now."""
    # An import statement's machinery, not importlib.import_module: `python -X importtime` (the
    # guard tests') lists only what the statement imports.
    qualified = f"gpuplay.core.workloads.{WORKLOAD_MODULES[name]}"
    __import__(qualified)
    module = sys.modules[qualified]
    for cls in module.WORKLOADS:
        if cls.name == name:
            workload: Workload = cls()
            return workload
    raise KeyError(name)


@functools.cache
def registry() -> dict[str, Workload]:
    """Every built-in workload by name (each module imported)."""
    return {name: _builtin(name) for name in WORKLOAD_MODULES}


def get_workload(name: str) -> Workload:
    """A built-in workload by name, or a user's code file named ``code:/absolute/path.py``.

    A code file is re-read when it changes on disk; nothing in it runs here.
    """
    if name.startswith("code:"):
        from gpuplay.core.workloads.usercode import load

        return load(name)
    if name in WORKLOAD_MODULES:
        return _builtin(name)
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOAD_MODULES)}")


__all__ = [
    "WORKLOAD_MODULES",
    "Param",
    "Workload",
    "get_workload",
    "reference_name",
    "registry",
    "relative_error",
]


def reference_name(name: str) -> str:
    """What workload `name`'s error is measured against; a code file's is float64 (not loaded here)."""
    if name.startswith("code:"):
        return "float64"
    try:
        return get_workload(name).reference_name
    except KeyError:
        return "float64"
