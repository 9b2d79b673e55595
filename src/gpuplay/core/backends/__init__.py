"""Backend registry: one instance per library, created on first use."""

from __future__ import annotations

import functools

from gpuplay.core.backends.base import Availability, Backend, DeviceInfo
from gpuplay.core.spec import BACKENDS


@functools.cache
def get_backend(name: str) -> Backend:
    if name == "numpy":
        from gpuplay.core.backends.numpy_backend import NumpyBackend

        return NumpyBackend()
    if name == "torch":
        from gpuplay.core.backends.torch_backend import TorchBackend

        return TorchBackend()
    if name == "cupy":
        from gpuplay.core.backends.cupy_backend import CupyBackend

        return CupyBackend()
    raise KeyError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")


def all_backends() -> list[Backend]:
    return [get_backend(n) for n in BACKENDS]


__all__ = ["Availability", "Backend", "DeviceInfo", "get_backend", "all_backends"]
