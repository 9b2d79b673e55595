"""Fast Fourier transforms, 1D and 2D (cuFFT on the GPU, pocketfft/MKL on the CPU)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import Array, ArrayModule, Param, Workload
from gpuplay.core.workloads.tolerance import fft

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def fft1d(xp: ArrayModule, x: Array) -> Array:
    return xp.fft.fft(x)


def fft2d(xp: ArrayModule, x: Array) -> Array:
    return xp.fft.fft2(x)


def _half_reason(backend: str, device: str, dtype: str, length: int) -> str | None:
    if dtype == "bfloat16":
        return "no FFT library (cuFFT, pocketfft, MKL) computes in bfloat16; use float16 on CUDA or float32"
    if dtype == "float16":
        if backend != "torch":
            return (
                f"{backend} computes a float16 FFT in float32, so it would not measure float16; use float32"
            )
        if not device.startswith("cuda"):
            return "PyTorch's CPU FFT has no float16 kernel; float16 FFT needs cuFFT (a CUDA device)"
        if length & (length - 1):
            return f"cuFFT computes float16 transforms only for power-of-two lengths; got {length}"
    return None


class FFT1D(Workload):
    name = "fft1d"
    title = "1D FFT"
    category = "spectral"
    params = (Param("n", int, 1 << 20, "samples", minimum=2, maximum=1 << 31, size=True),)
    tol_scale = 5.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        n = p["n"]
        return f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else str(n)

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal(p["n"]),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return fft1d

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.fft.fft(inputs[0])

    def flops(self, p: Mapping[str, Any]) -> float:
        n = p["n"]
        return 5.0 * n * math.log2(n)  # the usual complex-FFT convention

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 3.0 * p["n"] * itemsize  # real input read, complex output written

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return fft(compute_dtype, p["n"])

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        return _half_reason(backend, device, dtype, p["n"])


class FFT2D(FFT1D):
    name = "fft2d"
    title = "2D FFT"
    params = (Param("n", int, 1024, "grid side (n×n)", minimum=2, maximum=65536, size=True),)

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']}×{p['n']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal((p["n"], p["n"])),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return fft2d

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.fft.fft2(inputs[0])

    def flops(self, p: Mapping[str, Any]) -> float:
        n2 = p["n"] ** 2
        return 5.0 * n2 * math.log2(n2)

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 3.0 * p["n"] ** 2 * itemsize

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return fft(compute_dtype, p["n"] ** 2)  # rows then columns: log2 n² stages


WORKLOADS = [FFT1D, FFT2D]
