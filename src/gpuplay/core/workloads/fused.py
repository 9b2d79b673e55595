"""Kernel fusion: the tanh GELU op by op against one fused kernel.

Op by op, each operation is one pass over memory (one kernel launch on a GPU):
nine of them here. CuPy fuses by hand (ElementwiseKernel, RawKernel), PyTorch
through torch.compile (the compile lever). The kernel count of each is reported
with the result: measured with torch.profiler on PyTorch, by construction elsewhere.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Param, Workload

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

OPS_PER_ELEMENT = 9  # x·x, ·x, ·0.044715, x+, ·√(2/π), tanh, 1+, 0.5·x, the product

_EXPR = "0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))"


def gelu_ops(xp: Any, x: Any) -> Any:
    # Op by op: every operator reads and writes a full temporary (9 passes).
    # x·x·x, not x**3: NumPy's float32 power is a slow general pow (~150 ns/element
    # on the development machine, 170× a multiply) where torch has a fast path.
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def gelu_fused(cupy: Any, x: Any, kernel: Any) -> Any:
    # One launch: each thread reads x once and writes y once.
    return kernel(x)


def gelu_raw(cupy: Any, x: Any, kernel: Any) -> Any:
    y = cupy.empty_like(x)
    threads = 256
    kernel(((x.size + threads - 1) // threads,), (threads,), (x, y, cupy.int64(x.size)))
    return y


@functools.cache
def cupy_elementwise_kernel() -> Any:
    import cupy

    return cupy.ElementwiseKernel("T x", "T y", f"y = {_EXPR}", "gpuplay_gelu")


@functools.cache
def cupy_raw_kernel(ctype: str) -> Any:
    import cupy

    code = f"""
extern "C" __global__ void gpuplay_gelu(const {ctype}* x, {ctype}* y, long long n) {{
    long long i = (long long)blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {{ {ctype} v = x[i]; y[i] = ({ctype})({_EXPR.replace("x", "v")}); }}
}}"""
    return cupy.RawKernel(code, "gpuplay_gelu")


class Fused(Workload):
    name = "fused"
    title = "Fused element-wise: tanh GELU"
    category = "kernel fusion"
    params = (
        Param("n", int, 10_000_000, "elements", minimum=1, maximum=1 << 34, size=True),
        Param(
            "impl",
            str,
            "ops",
            "ops: op by op; elementwise / raw: one CuPy ElementwiseKernel / RawKernel (torch: --compile)",
            choices=("ops", "elementwise", "raw"),
        ),
    )
    tol_scale = 8.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']:,}"

    def _impl(self, backend: str, p: Mapping[str, Any]) -> str:
        return p["impl"] if backend == "cupy" else "ops"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        table: dict[str, Callable[..., Any]] = {"ops": gelu_ops, "elementwise": gelu_fused, "raw": gelu_raw}
        return table[self._impl(backend, p)]

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        helpers: dict[str, list[Callable[..., Any]]] = {
            "ops": [],
            "elementwise": [cupy_elementwise_kernel],
            "raw": [cupy_raw_kernel],
        }
        return helpers[self._impl(backend, p)]

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        impl = self._impl(backend, p)
        if impl == "elementwise":
            return functools.partial(gelu_fused, xp, kernel=cupy_elementwise_kernel())
        if impl == "raw":
            raw = {"float32": "float", "float64": "double"}

            def step(x: Any) -> Any:
                return gelu_raw(xp, x, cupy_raw_kernel(raw[str(x.dtype)]))

            return step
        return functools.partial(gelu_ops, xp)

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.asarray(gelu_ops(np, inputs[0]))

    def flops(self, p: Mapping[str, Any]) -> float:
        return 9.0 * p["n"]

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 2.0 * p["n"] * itemsize  # the fused minimum: read x, write y

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 4.0 * p["n"]  # op by op holds temporaries

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return self.tol_scale * EPS[compute_dtype]

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        if backend == "torch" and p["impl"] != "ops":
            return (
                f"impl={p['impl']} is a CuPy kernel (ElementwiseKernel/RawKernel); PyTorch fuses through "
                "torch.compile: use impl=ops with --compile default"
            )
        if backend == "cupy" and p["impl"] != "ops" and dtype not in ("float32", "float64"):
            return f"the {p['impl']} kernel's CUDA code is written for float and double, not {dtype}; use float32"
        return None

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        if backend == "numpy" and p["impl"] != "ops":
            return [f"NumPy has no kernel fusion: impl={p['impl']} runs op by op ({OPS_PER_ELEMENT} passes)"]
        return []

    def after_run(
        self, step: Callable[[], Any], backend: str, device: str, p: Mapping[str, Any]
    ) -> list[str]:
        impl = self._impl(backend, p)
        if backend == "torch":
            from gpuplay.core.measure.torchprof import kernel_count

            count, what = kernel_count(step, device)
            return [f"kernels per step: {count:g} ({what}, measured with torch.profiler)"]
        if impl == "ops":
            return [f"kernels per step: {OPS_PER_ELEMENT} (one per operator, by construction)"]
        return [f"kernels per step: 1 (one {impl} kernel, by construction)"]


WORKLOADS: list[Callable[[], Workload]] = [Fused]
