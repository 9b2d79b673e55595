"""A prefix sum (scan): a loop that looks sequential, and a basic parallel primitive on a GPU."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import Array, ArrayModule, Param, Workload
from gpuplay.core.workloads.tolerance import running_sum

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

FLOAT16_MAX = 65504.0


def scan(xp: ArrayModule, x: Array) -> Array:
    return xp.cumsum(x)


def scan_torch(torch: ArrayModule, x: Array) -> Array:
    return torch.cumsum(x, dim=0)


class Scan(Workload):
    name = "scan"
    title = "Prefix sum (cumulative sum)"
    category = "memory-bound"
    params = (Param("n", int, 10_000_000, "elements", minimum=1, maximum=1 << 34, size=True),)

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']:,}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        # Uniform on [0, 1): every prefix is positive and grows, so relative errors mean
        # something, and a running sum that stops growing (a narrow accumulator) shows.
        return (rng.random(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return scan_torch if backend == "torch" else scan

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.cumsum(inputs[0])

    def flops(self, p: Mapping[str, Any]) -> float:
        return float(max(0, p["n"] - 1))  # one addition per element after the first

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 2.0 * p["n"] * itemsize  # read x, write the prefixes

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return running_sum(compute_dtype, p["n"])

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        out = []
        if dtype == "float16" and p["n"] / 2 > FLOAT16_MAX:
            out.append(
                f"float16: the running sum of {p['n']:,} values in [0, 1) reaches about {p['n'] / 2:,.0f}, "
                f"past float16's largest number ({FLOAT16_MAX:,.0f}): expect inf; use bfloat16 or float32"
            )
        if dtype == "float16" and backend == "numpy":
            # np.cumsum(float16) adds in float16: past 2048, adding a value under 1 rounds away
            out.append("NumPy accumulates a float16 cumsum in float16: past 2,048 the sum stops growing")
        return out


WORKLOADS = [Scan]
