"""The workload registry: every computation gpuplay can time, by name."""

from __future__ import annotations

import functools

from gpuplay.core.workloads import (
    attention,
    autodiff,
    dataloader,
    fused,
    inference,
    linalg,
    pde,
    pointwise,
    scan,
    sparse,
    spectral,
    transfers,
)
from gpuplay.core.workloads.base import Param, Workload, relative_error


@functools.cache
def registry() -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for module in (
        linalg,
        pointwise,
        spectral,
        pde,
        autodiff,
        attention,
        inference,
        transfers,
        fused,
        sparse,
        scan,
        dataloader,
    ):
        for cls in module.WORKLOADS:
            w = cls()
            out[w.name] = w
    return out


def get_workload(name: str) -> Workload:
    """A built-in workload by name, or a user's code file named ``code:/absolute/path.py``.

    A code file is re-read when it changes on disk; nothing in it runs here.
    """
    if name.startswith("code:"):
        from gpuplay.core.workloads.usercode import load

        return load(name)
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(registry())}") from None


__all__ = ["Param", "Workload", "get_workload", "reference_name", "registry", "relative_error"]


def reference_name(name: str) -> str:
    """What workload `name`'s error is measured against; a code file's is float64 (not loaded here)."""
    if name.startswith("code:"):
        return "float64"
    try:
        return get_workload(name).reference_name
    except KeyError:
        return "float64"
