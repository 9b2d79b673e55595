"""PyTorch on the CPU, on every CUDA device (NVIDIA's, or AMD's under ROCm), Intel's XPU and
Apple's MPS where present. Which vendor a device is comes from core/hw (labels, refusals)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpuplay.core.backends import peakmem
from gpuplay.core.backends.base import Availability, Backend, DeviceInfo, StepTimer, host_timer, widen
from gpuplay.core.backends.compile_watch import DynamoCounts, read_counters
from gpuplay.core.backends.oom import out_of_memory
from gpuplay.core.hw.system import cpu_count, cpu_name
from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.spec import RunSpec

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def _torch() -> Any:
    import torch

    return torch


def torch_dtype(name: str) -> Any:
    torch = _torch()
    return {
        "float64": torch.float64,
        "float32": torch.float32,
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
    }[name]


def cuda_unavailable_reason(torch: Any) -> str:
    hip = getattr(torch.version, "hip", None)
    if hip:  # a ROCm build: its GPUs would be cuda:N too
        return f"PyTorch {torch.__version__} (ROCm {hip}) sees no AMD GPU: no amdgpu driver or GPU visible"
    if torch.version.cuda is None:
        return f"PyTorch {torch.__version__} is a CPU-only build (no CUDA)"
    return f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: no NVIDIA driver or GPU visible"


class TorchBackend(Backend):
    name = "torch"
    title = "PyTorch"

    def _probe(self) -> tuple[Availability, list[DeviceInfo]]:
        try:
            torch = _torch()
        except ImportError as exc:
            return Availability(False, f"PyTorch is not installed ({exc})"), []
        from gpuplay.core.hw.devices import torch_accelerators

        devices = [DeviceInfo("cpu", f"{cpu_name()} ({cpu_count()} cores)")]
        for a in torch_accelerators(torch):
            if a.vendor == "NVIDIA":  # as before: the board's own name, its capability and SMs
                devices.append(DeviceInfo(a.torch_device, a.name, a.memory_bytes, dict(a.extra)))
            else:  # AMD (ROCm), Intel (XPU), Apple (MPS): labelled so no result calls them CUDA
                extra = {**a.extra, "vendor": a.vendor, "arch": a.arch, "runtime": a.runtime}
                devices.append(DeviceInfo(a.torch_device, a.label(), a.memory_bytes, extra))
        return Availability(True), devices

    def cuda_reason(self) -> str:
        """Why there is no cuda device for torch, or '' when there is one."""
        if self._remote:
            return str(self._facts.get("cuda_reason", ""))
        avail, devices = self.probe()
        if not avail.ok:
            return avail.reason
        if any(d.id.startswith("cuda") for d in devices):
            return ""
        return cuda_unavailable_reason(_torch())

    def version(self) -> str | None:
        if self._remote:
            return self._facts.get("version")
        try:
            return _torch().__version__
        except ImportError:
            return None

    def module(self) -> Any:
        return _torch()

    def from_host(self, host: np.ndarray, device: str, dtype: str) -> Any:
        torch = _torch()
        t = torch.from_numpy(np.ascontiguousarray(host))
        return t.to(device=device, dtype=torch_dtype(dtype))

    def to_host(self, x: Any) -> Any:
        if isinstance(x, tuple | list):
            return tuple(self.to_host(v) for v in x)
        torch = _torch()
        x = x.detach()
        if x.is_complex():
            x = x.to(torch.complex128)
        elif x.is_floating_point():
            x = x.to(torch.float64)
        return widen(x.cpu().numpy())

    def download(self, x: Any) -> Any:
        if isinstance(x, tuple | list):
            return tuple(self.download(v) for v in x)
        return x.cpu()

    def synchronize(self, device: str) -> None:
        torch = _torch()
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        elif device.startswith("xpu"):
            torch.xpu.synchronize(device)
        elif device == "mps":
            torch.mps.synchronize()

    def timer_name(self, device: str) -> str:
        """How a step on `device` is timed, for the result's conditions (never "CUDA" on AMD)."""
        torch = _torch()
        if device.startswith("cuda"):
            return "HIP events (torch.cuda on ROCm)" if getattr(torch.version, "hip", None) else "CUDA events"
        if device.startswith("xpu"):
            return "XPU events (torch.xpu)"
        if device == "mps":
            return (
                "MPS events (torch.mps)"
                if hasattr(torch.mps, "Event")
                else "perf_counter_ns + torch.mps.synchronize"
            )
        return "perf_counter_ns (synchronous)"

    def step_timer(self, device: str) -> StepTimer:
        if not device.startswith("cuda"):
            torch = _torch()
            if device.startswith("xpu"):
                return _event_timer(torch.xpu)
            if device == "mps":
                if hasattr(torch.mps, "Event"):
                    return _event_timer(torch.mps)
                return _synced_timer(lambda: self.synchronize(device))
            return host_timer
        torch = _torch()
        # One pair of events, reused: the timed loop allocates nothing.
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        stream = torch.cuda.current_stream(device)

        def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
            start.record(stream)
            out = fn()
            end.record(stream)
            end.synchronize()
            return start.elapsed_time(end) * 1e-3, out

        return timed

    def is_out_of_memory(self, exc: BaseException) -> bool:
        # torch.OutOfMemoryError, a cuFFT/cuBLAS/cuSOLVER workspace that could not be allocated
        # (a RuntimeError naming the status), or the CPU allocator's RuntimeError.
        return out_of_memory(exc) is not None

    def free_memory(self, device: str) -> None:
        torch = _torch()
        if device.startswith("cuda") and torch.cuda.is_available():
            torch.cuda.empty_cache()
        elif device.startswith("xpu"):
            torch.xpu.empty_cache()
        elif device == "mps":
            torch.mps.empty_cache()

    def device_memory_free(self, device: str) -> int | None:
        if not device.startswith("cuda"):
            return None
        free, _total = _torch().cuda.mem_get_info(device)
        return int(free)

    def reset_peak_memory(self, device: str) -> None:
        if device != "cpu":
            peakmem.reset(_torch(), device)

    def peak_memory(self, device: str) -> tuple[int | None, str] | None:
        # The allocator's own count where the vendor keeps one (core/backends/peakmem.py): this
        # process's tensors on this device, the run's inputs included; cached free blocks, the
        # context and other processes not. MPS keeps none: (None, why).
        return None if device == "cpu" else peakmem.read(_torch(), device)

    def cache_flusher(self, device: str) -> Any:
        if not device.startswith("cuda"):
            return super().cache_flusher(device)
        from gpuplay.core.backends.cache_flush import CacheFlusher, device_flush_bytes

        torch = _torch()
        l2 = int(getattr(torch.cuda.get_device_properties(cuda_index(device)), "L2_cache_size", 0) or 0)
        nbytes = device_flush_bytes(l2)
        buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        # zero_ is queued on the step's stream before the start event: outside the interval.
        return CacheFlusher(buf.zero_, nbytes, f"L2 {l2 / 2**20:.0f} MiB" if l2 else "L2", "zeroed")

    def compile(self, fn: Callable[..., Any], mode: str) -> Callable[..., Any]:
        _import_inductor_quietly()
        torch = _torch()
        # The engine lives across runs: without a reset, dynamo's cache from an earlier run of the
        # same kernel makes this "compile" a cache hit (~0 s), and a new size would recompile
        # with dynamic shapes. Static shapes: one configuration, one specialised graph.
        torch._dynamo.reset()
        compiled: Callable[..., Any] = torch.compile(
            fn, mode=None if mode == "default" else mode, dynamic=False
        )
        return compiled

    def compile_counts(self) -> DynamoCounts | None:
        from torch._dynamo.utils import counters

        return read_counters(counters)

    def autocast(self, fn: Callable[..., Any], device: str, dtype: str) -> Callable[..., Any]:
        autocast = _torch().autocast
        device_type = device.split(":")[0]
        cast_dtype = torch_dtype(dtype)

        def autocast_kernel(*args: Any) -> Any:
            with autocast(device_type=device_type, dtype=cast_dtype):
                return fn(*args)

        return autocast_kernel

    def capture_graph(self, step: Callable[[], Any], device: str) -> Callable[[], Any]:
        torch = _torch()
        # The whole capture runs with `device` current: torch.cuda.graph's default capture stream,
        # the allocator's private pool and every launch otherwise land on device 0 while the
        # step's tensors live on cuda:N, and the graph records nothing.
        with torch.cuda.device(cuda_index(device)):
            stream = torch.cuda.Stream(device)
            stream.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(stream):  # warm the allocator on a side stream, as capture requires
                for _ in range(2):
                    step()
            torch.cuda.current_stream(device).wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            # Captured on a side stream of `device` (capture is illegal on the legacy default stream).
            with torch.cuda.graph(graph, stream=torch.cuda.Stream(device)):
                static_out = step()
            torch.cuda.synchronize(device)

        def replay() -> Any:
            graph.replay()  # on the current stream of `device`: configured() keeps it current
            return static_out

        return replay

    def thread_counts(self) -> dict[str, int | None]:
        torch = _torch()
        return {"torch_intraop": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}

    @contextmanager
    def configured(self, spec: RunSpec) -> Iterator[list[str]]:
        torch = _torch()
        notes: list[str] = []
        saved_threads = torch.get_num_threads()
        saved_linalg = None
        with contextlib.ExitStack() as stack:
            try:
                if spec.threads is not None:
                    torch.set_num_threads(spec.threads)
                if spec.device.startswith("cuda"):
                    # cuda:N current for the whole run: launches, streams, events and graph capture
                    # that name no device go to the current one, which is cuda:0 by default.
                    stack.enter_context(torch.cuda.device(cuda_index(spec.device)))
                    stack.enter_context(fp32_matmul_precision(torch, spec.tf32))
                    if spec.linalg_library != "default":
                        saved_linalg = torch.backends.cuda.preferred_linalg_library()
                        torch.backends.cuda.preferred_linalg_library(spec.linalg_library)
                elif spec.device.startswith("xpu"):  # xpu:N current, as cuda:N is above
                    stack.enter_context(torch.xpu.device(cuda_index(spec.device)))
                yield notes
            finally:
                torch.set_num_threads(saved_threads)
                if saved_linalg is not None:
                    torch.backends.cuda.preferred_linalg_library(saved_linalg)


def cuda_index(device: str) -> int:
    """The ordinal of 'cuda' (0) or 'cuda:N'."""
    return int(device.split(":")[1]) if ":" in device else 0


@contextmanager
def fp32_matmul_precision(torch: Any, tf32: bool) -> Iterator[None]:
    """float32 matmuls and convolutions in TF32 (or full IEEE float32) for the block, then restored.

    Both of torch's APIs are set, and agree: the legacy one first (set_float32_matmul_precision,
    cudnn.allow_tf32), then, where they exist (torch 2.9+), the fp32_precision attributes. On
    torch 2.13 setting only the new ones makes every legacy getter raise ("mix of the legacy and
    new APIs"), and inductor reads one: its GEMM autotuning keys its choices by
    torch.get_float32_matmul_precision() (_inductor/select_algorithm.py), so a max-autotune
    compile under TF32 failed and fell back to eager.

    Every flag a path reads is set: cuBLAS reads cuda.matmul's, cuDNN's convolutions cudnn.conv's,
    inductor's convolution templates the cuDNN-wide cudnn.fp32_precision (torch 2.13,
    _inductor/kernel/conv.py) and its backward templates cudnn.allow_tf32, whose getter raises
    when conv and rnn differ: so rnn is set alike. The legacy setter also turns oneDNN's CPU
    matmul to TF32 ("high"); that flag is put back at once: the run's device is CUDA.
    """
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    conv, rnn = getattr(cudnn, "conv", None), getattr(cudnn, "rnn", None)
    onednn = getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)
    new_api = hasattr(matmul, "fp32_precision") and conv is not None and hasattr(conv, "fp32_precision")
    flags = [f for f in (matmul, cudnn, conv, rnn, onednn) if f is not None and hasattr(f, "fp32_precision")]
    flags = flags if new_api else []
    saved_new = [f.fp32_precision for f in flags]
    legacy: tuple[str, bool] | None = None
    with contextlib.suppress(RuntimeError):  # a caller's own mix of the two APIs: nothing to restore
        legacy = (torch.get_float32_matmul_precision(), bool(torch.backends.cudnn.allow_tf32))
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    want = "tf32" if tf32 else "ieee"
    for f, value in zip(flags, saved_new, strict=True):  # the cuDNN-wide flag before its sub-flags
        f.fp32_precision = value if f is onednn else want
    try:
        yield
    finally:
        if legacy is not None:
            torch.set_float32_matmul_precision(legacy[0])
            torch.backends.cudnn.allow_tf32 = legacy[1]
        for f, value in zip(flags, saved_new, strict=True):
            f.fp32_precision = value


def _event_timer(mod: Any) -> StepTimer:
    """Device events around the step (torch.xpu or torch.mps: the torch.cuda Event API), one
    pair reused so the timed loop allocates nothing; the end event's wait is the sync."""
    start = mod.Event(enable_timing=True)
    end = mod.Event(enable_timing=True)

    def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
        start.record()
        out = fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3, out

    return timed


def _synced_timer(sync: Callable[[], None]) -> StepTimer:
    import time

    def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
        t0 = time.perf_counter_ns()
        out = fn()
        sync()
        return (time.perf_counter_ns() - t0) * 1e-9, out

    return timed


def _import_inductor_quietly() -> None:
    """Load torch.compile's backend with torch's own deprecation notice silenced.

    torch.compile imports torch._inductor, which imports torch.utils.mkldnn, whose classes
    still use the deprecated `torch.jit.script_method`: 14 DeprecationWarnings per process
    about torch's code, none a gpuplay user could act on. Only that message is filtered,
    only during the import.
    """
    import sys
    import warnings

    if "torch._inductor.compile_fx" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script_method` is deprecated", category=DeprecationWarning
        )
        import torch._inductor.compile_fx  # noqa: F401
