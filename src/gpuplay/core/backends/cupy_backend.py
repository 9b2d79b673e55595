"""CuPy: NumPy's API on CUDA devices. Optional (`pip install cupy-cuda13x`, or cupy-cuda12x)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpuplay.core.backends.base import Availability, Backend, DeviceInfo, StepTimer, widen
from gpuplay.core.backends.oom import out_of_memory
from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.spec import RunSpec

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

CUPY_DTYPES = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float16",
}  # by name, as NumPy reads them


def _cupy() -> Any:
    import cupy

    return cupy


class CupyBackend(Backend):
    name = "cupy"
    title = "CuPy"

    def __init__(self) -> None:
        super().__init__()
        self._used: set[int] = set()  # devices this process has allocated on: each has its own pool

    def _probe(self) -> tuple[Availability, list[DeviceInfo]]:
        # cupy.cuda.is_available() can take >10 s on some machines; this runs in a
        # background thread (start_probe) so no caller that cannot wait is blocked.
        try:
            cupy = _cupy()
        except ImportError:
            # The package itself, which works however gpuplay was installed (an extra needs a
            # checkout or a wheel to name: '.[cupy]').
            return Availability(
                False,
                "CuPy is not installed: on a CUDA machine, pip install cupy-cuda13x "
                "(cupy-cuda12x for CUDA 12; from a checkout: pip install -e '.[cupy]')",
            ), []
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # CUDARuntimeError, or a missing libcuda
            return Availability(
                False, f"CuPy {cupy.__version__}: no CUDA device ({type(exc).__name__}: {exc})"
            ), []
        hip = bool(getattr(cupy.cuda.runtime, "is_hip", False))
        if count == 0:
            return Availability(
                False, f"CuPy {cupy.__version__}: no {'AMD GPU (ROCm)' if hip else 'CUDA device'}"
            ), []
        if hip:  # CuPy's ROCm build: AMD GPUs behind the cuda API, labelled as what they are
            from gpuplay.core.hw import amd

            extra = lambda a: {"vendor": a.vendor, "arch": a.arch, "runtime": a.runtime}  # noqa: E731
            return Availability(True), [
                DeviceInfo(a.torch_device, a.label(), a.memory_bytes, extra(a))
                for a in amd.cupy_devices(cupy)
            ]
        devices = []
        for i in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
            devices.append(DeviceInfo(f"cuda:{i}", name, int(props.get("totalGlobalMem", 0)) or None))
        return Availability(True), devices

    def version(self) -> str | None:
        try:
            return _cupy().__version__
        except ImportError:
            return None

    def module(self) -> Any:
        return _cupy()

    def _device(self, device: str) -> Any:
        index = int(device.split(":")[1]) if ":" in device else 0
        self._used.add(index)
        return _cupy().cuda.Device(index)

    def from_host(self, host: np.ndarray, device: str, dtype: str) -> Any:
        cupy = _cupy()
        with self._device(device):
            return cupy.asarray(np.ascontiguousarray(host, dtype=CUPY_DTYPES[dtype]))

    def to_host(self, x: Any) -> Any:
        if isinstance(x, tuple | list):
            return tuple(self.to_host(v) for v in x)
        return widen(_cupy().asnumpy(x))

    def download(self, x: Any) -> Any:
        if isinstance(x, tuple | list):
            return tuple(self.download(v) for v in x)
        return x.get()

    def synchronize(self, device: str) -> None:
        with self._device(device):
            _cupy().cuda.get_current_stream().synchronize()

    def timer_name(self, device: str) -> str:
        """How a step is timed, for the result's conditions: never "CUDA" on an AMD GPU."""
        hip = getattr(getattr(getattr(_cupy(), "cuda", None), "runtime", None), "is_hip", False)
        return "HIP events (CuPy on ROCm)" if hip else "CUDA events"

    def step_timer(self, device: str) -> StepTimer:
        cupy = _cupy()
        with self._device(device):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()

        def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            return cupy.cuda.get_elapsed_time(start, end) * 1e-3, out

        return timed

    @contextmanager
    def configured(self, spec: RunSpec) -> Iterator[list[str]]:
        # CuPy launches on the *current* device: make the run's device current for the whole run.
        with self._device(spec.device):
            yield []

    def cache_flusher(self, device: str) -> Any:
        from gpuplay.core.backends.cache_flush import CacheFlusher, device_flush_bytes

        cupy = _cupy()
        dev = self._device(device)
        l2 = int(cupy.cuda.runtime.getDeviceProperties(dev.id).get("l2CacheSize", 0) or 0)
        nbytes = device_flush_bytes(l2)
        with dev:
            buf = cupy.empty(nbytes, dtype=cupy.uint8)
        self._used.add(dev.id)
        return CacheFlusher(lambda: buf.fill(0), nbytes, f"L2 {l2 / 2**20:.0f} MiB" if l2 else "L2", "zeroed")

    def is_out_of_memory(self, exc: BaseException) -> bool:
        # OutOfMemoryError from CuPy's pool, CuFFTError(CUFFT_ALLOC_FAILED) from a plan's
        # workspace, CUBLASError / CUSOLVERError / CUDARuntimeError with an allocation status.
        return out_of_memory(exc) is not None

    def device_memory_free(self, device: str) -> int | None:
        with self._device(device):
            free, _total = _cupy().cuda.runtime.memGetInfo()
        return int(free)

    def peak_memory(self, device: str) -> tuple[int | None, str] | None:
        # CuPy's pool counts no peak and keeps no count to reset: what it holds after the timed
        # phase (total_bytes) is every block acquired since the run began, set-up, warm-up and
        # a cold run's flush buffer included, rounded up to its block sizes. That is no peak of
        # the timed steps, nor comparable with torch's max_memory_allocated (tensors alive, from
        # the start of the timed phase): n/a, with what the pool holds said beside it.
        from gpuplay.core.backends.oom import fmt_bytes

        with self._device(device):
            held = int(_cupy().get_default_memory_pool().total_bytes())
        return None, (
            f"n/a: CuPy's memory pool counts no peak; it held {fmt_bytes(held)} after the timed phase "
            "(set-up, warm-up and any cache-flush buffer included)"
        )

    def free_memory(self, device: str) -> None:
        """Empty every cache a run leaves behind, on every device this process used.

        The device pool frees the *current* device's blocks only, and the cuFFT plan cache is
        per device: each is emptied with its device current. Pinned host buffers (transfers)
        and FFT plans would otherwise carry one run's memory and plans into the next.
        """
        try:
            cupy = _cupy()
        except ImportError:
            return
        self._used.add(int(device.split(":")[1]) if ":" in device else 0)
        pool = cupy.get_default_memory_pool()
        for index in sorted(self._used):
            try:
                with cupy.cuda.Device(index):
                    pool.free_all_blocks()
                    cupy.fft.config.get_plan_cache().clear()
            except Exception:
                pass  # a device that is gone or poisoned: the others still get freed
        try:
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        except Exception:
            pass
