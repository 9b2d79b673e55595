"""The heat equation on a periodic grid: explicit Euler with a 5-point roll stencil."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import Array, ArrayModule, Param, Workload
from gpuplay.core.workloads.tolerance import iterated

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def heat(xp: ArrayModule, u: Array, steps: int, alpha: float) -> Array:
    for _ in range(steps):
        lap = xp.roll(u, 1, 0) + xp.roll(u, -1, 0) + xp.roll(u, 1, 1) + xp.roll(u, -1, 1) - 4 * u
        u = u + alpha * lap
    return u


class Heat(Workload):
    name = "heat"
    title = "Heat equation (5-point stencil)"
    category = "PDE"
    params = (
        Param("n", int, 1024, "grid side (n×n, periodic)", minimum=4, maximum=65536, size=True),
        Param("steps", int, 100, "explicit Euler steps", minimum=1, maximum=100_000),
        Param("alpha", float, 0.2, "diffusion number (stable up to 0.25)", minimum=0.0, maximum=0.25),
    )

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']}² × {p['steps']} steps"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.random((p["n"], p["n"])),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return heat

    def kernel_kwargs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return {"steps": p["steps"], "alpha": p["alpha"]}

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return heat(np, inputs[0], p["steps"], p["alpha"])

    def flops(self, p: Mapping[str, Any]) -> float:
        return 7.0 * p["n"] ** 2 * p["steps"]

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        # The least traffic any implementation needs: read u and write u per step.
        # roll() materialises four shifted copies, so the real traffic is ~6x this.
        return 2.0 * p["n"] ** 2 * itemsize * p["steps"]

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 7.0 * p["n"] ** 2  # u, four rolled copies, the Laplacian, the new u

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return iterated(compute_dtype, p["steps"])


WORKLOADS = [Heat]
