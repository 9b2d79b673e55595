"""Memory-bound work: an element-wise expression and reductions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import Array, ArrayModule, Param, Workload
from gpuplay.core.workloads.tolerance import SAFETY, summed
from gpuplay.core.workloads.tolerance import elementwise as elementwise_tolerance

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def elementwise(xp: ArrayModule, x: Array) -> Array:
    return xp.sin(x) * xp.exp(-(x**2))


def reductions(xp: ArrayModule, x: Array) -> Array:
    # ddof=0 on every backend: np.std's default. torch.std defaults to the
    # unbiased estimator, so comparing the defaults compares different numbers.
    return xp.stack([x.sum(), x.mean(), x.std()])


def reductions_torch(torch: ArrayModule, x: Array) -> Array:
    return torch.stack([x.sum(), x.mean(), x.std(correction=0)])


class Elementwise(Workload):
    name = "elementwise"
    title = "Element-wise sin(x)·exp(−x²)"
    category = "memory-bound"
    params = (Param("n", int, 10_000_000, "elements", minimum=1, maximum=1 << 34, size=True),)
    tol_scale = 4.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']:,}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return elementwise

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x = inputs[0]
        return np.sin(x) * np.exp(-(x**2))

    def flops(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["n"]  # square, negate, multiply, plus sin and exp counted once each

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 2.0 * p["n"] * itemsize

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        # sin·exp of a rounded x: a few roundings, and x's own amplified by the formula's
        # condition number (2x² from exp(−x²), about 2 where the norm's mass is).
        return elementwise_tolerance(compute_dtype, c=2 * SAFETY)


class Reductions(Workload):
    name = "reductions"
    title = "Reductions: sum, mean, std"
    category = "memory-bound"
    params = (Param("n", int, 10_000_000, "elements", minimum=2, maximum=1 << 34, size=True),)
    tol_scale = 20.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']:,}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        # Uniform on [0, 1): sums and means far from zero, so relative errors mean something.
        return (rng.random(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return reductions_torch if backend == "torch" else reductions

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x = inputs[0]
        return np.array([x.sum(), x.mean(), x.std()])

    def flops(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["n"]

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 4.0 * p["n"] * itemsize  # sum, mean and the two passes of std each read x

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return summed(compute_dtype, p["n"])


WORKLOADS = [Elementwise, Reductions]
