"""Gradients two ways: reverse-mode autograd against central finite differences.

This compares algorithms as much as devices: finite differences need 2·n²
function evaluations, autograd one forward and one backward pass. `method`
lets PyTorch run either, so device and algorithm can be told apart.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Array, ArrayModule, Param, Workload

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def objective(xp: ArrayModule, x: Array) -> Array:
    return (xp.sin(x) * xp.exp(-0.5 * x * x)).sum()


def _copy(a: Array) -> Array:
    return a.clone() if hasattr(a, "clone") else a.copy()  # torch | numpy, cupy


def grad_finite_differences(xp: ArrayModule, x: Array, h: float) -> Array:
    x = _copy(x)
    g = xp.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.shape[0]):
        xi = _copy(flat[i])
        flat[i] = xi + h
        f_plus = objective(xp, x)
        flat[i] = xi - h
        f_minus = objective(xp, x)
        flat[i] = xi
        gflat[i] = (f_plus - f_minus) / (2 * h)
    return g


def grad_autograd(torch: ArrayModule, x: Array) -> Array:
    x = x.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(objective(torch, x), x)
    return g


class Autograd(Workload):
    name = "autograd"
    title = "Gradient: autograd vs finite differences"
    category = "autodiff"
    params = (
        Param("n", int, 64, "grid side: n² gradient components", minimum=2, maximum=4096, size=True),
        Param(
            "method",
            str,
            "auto",
            "auto: autograd on PyTorch, finite differences elsewhere",
            choices=("auto", "autograd", "fd"),
        ),
    )
    graph_safe = False

    def size_label(self, p: Mapping[str, Any]) -> str:
        n = p["n"]
        return f"{n}² = {n * n:,} components"

    def method(self, backend: str, p: Mapping[str, Any]) -> str:
        if p["method"] == "auto":
            return "autograd" if backend == "torch" else "fd"
        return p["method"]

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal((p["n"], p["n"])),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return grad_autograd if self.method(backend, p) == "autograd" else grad_finite_differences

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        if self.method(backend, p) == "autograd":
            return [objective]
        return [objective, _copy]

    def effective(self, p: Mapping[str, Any], backend: str, compute_dtype: str) -> dict[str, Any]:
        return {**p, "_method": self.method(backend, p), "_compute_dtype": compute_dtype}

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        if self.method(backend, p) == "autograd":
            return functools.partial(grad_autograd, xp)
        return functools.partial(grad_finite_differences, xp, h=self.step_size(p))

    def step_size(self, p: Mapping[str, Any]) -> float:
        # Central differences balance truncation (h²) against rounding (eps/h):
        # h = eps^(1/3) for the dtype the function is evaluated in.
        return float(EPS[p.get("_compute_dtype", "float32")] ** (1 / 3))

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        x = inputs[0]
        e = np.exp(-0.5 * x * x)
        return np.cos(x) * e - x * np.sin(x) * e  # the exact gradient

    def flops(self, p: Mapping[str, Any]) -> float:
        n2 = p["n"] ** 2
        if p.get("_method") == "fd":
            return 2.0 * n2 * 6.0 * n2  # 2·n² evaluations of a 6-flop-per-element objective
        return 20.0 * n2

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        n2 = p["n"] ** 2
        if p.get("_method") == "fd":
            return 2.0 * n2 * n2 * itemsize
        return 4.0 * n2 * itemsize

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["n"] ** 2

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        if p.get("_method") == "fd":
            # Rounding in the summed objective dominates: |f|·eps/h per component.
            return 50.0 * p["n"] * EPS[compute_dtype] ** (2 / 3)
        return 20.0 * EPS[compute_dtype]

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        if self.method(backend, p) == "autograd" and backend != "torch":
            return f"autograd needs PyTorch; {backend} has no automatic differentiation (use method=fd)"
        if dtype in ("float16", "bfloat16") and self.method(backend, p) == "fd":
            return f"finite differences in {dtype} lose every digit (eps^(1/3) step is ~0.1); use float32"
        return None


WORKLOADS = [Autograd]
