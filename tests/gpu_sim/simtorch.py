"""torch with a simulated `cuda:0` (or `xpu:0`, for GPUPLAY_TEST_SIM=xpu): tensors on it live in
host memory, every op on them is a kernel of the simulated device (tests/gpu_sim/device.py), and
torch.cuda (torch.xpu) answers as torch's own module documents it: is_available, device_count, get_device_properties (name, uuid, L2),
Event(enable_timing=True) with record/synchronize/elapsed_time/query, synchronize, streams,
memory_allocated/max_memory_allocated/reset_peak_memory_stats/memory_stats, mem_get_info,
empty_cache, and torch.OutOfMemoryError when an allocation passes the board's memory.

A tensor on the device is a `SimCudaTensor`: a torch.Tensor subclass whose `device` reads
cuda:0 (xpu:0) and whose `__torch_function__` runs each op on the host data as one kernel.
`.cpu()`, `.to("cpu")` give a plain host tensor; `.numpy()` refuses, as torch does for a device
tensor. On a queued device (the XPU), the host goes on while the device runs what was issued:
an event, a synchronisation, and a copy to the host (or a blocking one from it) wait for it.

The kind: `h100` (NVIDIA, torch.version.cuda), `mi300` (AMD under ROCm: torch.version.hip,
torch.version.cuda None, gcnArchName; no NVML), `xpu` (Intel through torch.xpu; torch.cuda
stays as this torch has it).
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from types import SimpleNamespace
from typing import Any

from tests.gpu_sim.device import KIND_ENV, device, ledger

RUNTIMES_ENV = "GPUPLAY_TEST_SIM_RUNTIMES"

MATMUL_OPS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "conv1d", "conv2d", "conv3d", "einsum",
    "tensordot", "scaled_dot_product_attention", "__matmul__", "__rmatmul__", "addbmm", "dot", "mv",
}  # fmt: skip
MEMSET_OPS = {"zero_", "fill_", "zeros_like", "ones_like", "full_like"}
COPY_OPS = {"copy_", "to", "clone", "contiguous", "cpu", "cuda"}
FLUSH_MIN_BYTES = 64 * 2**20
FLUSH_BYTES_PER_S = 32e9  # a 256 MiB flush: 8.4 ms of simulated device time
FACTORIES = (
    "empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "linspace", "logspace",
    "eye", "tensor", "as_tensor", "empty_strided", "zeros_like", "ones_like", "empty_like",
    "full_like", "rand_like", "randn_like", "randint_like", "randperm", "scalar_tensor",
)  # fmt: skip
# Reading these never runs a kernel.
QUIET = {
    "size", "dim", "numel", "stride", "dtype", "shape", "is_floating_point", "is_complex",
    "element_size", "nelement", "storage_offset", "is_contiguous", "requires_grad", "data_ptr",
    "untyped_storage", "__len__", "__repr__", "__format__", "__hash__", "__bool__", "__iter__",
    "ndim", "layout", "grad", "is_leaf", "names", "T", "mT", "__reduce_ex__", "view", "reshape",
    "__getitem__", "unsqueeze", "squeeze", "expand", "permute", "transpose", "t", "flatten",
    "detach", "real", "imag", "view_as", "as_strided", "narrow", "split", "chunk", "unbind",
    "item", "tolist", "__setstate__", "_make_subclass", "requires_grad_",
}  # fmt: skip


def _name(func: Any) -> str:
    name = getattr(func, "__name__", None) or str(func)
    return name


def _kind(name: str) -> str:
    if name in MATMUL_OPS:
        return "matmul"
    if name in MEMSET_OPS:
        return "memset"
    if name in COPY_OPS:
        return "copy"
    return "elementwise"


DEVICE_TYPE = "cuda"  # the simulated device's torch type, set by install from the profile


def _is_cuda(dev: Any) -> bool:
    """Whether `dev` names the simulated device (cuda:0, or xpu:0 for the XPU kind)."""
    if dev is None:
        return False
    if isinstance(dev, int):
        return True  # torch: an int device is an ordinal of the accelerator
    return str(dev).split(":")[0] == DEVICE_TYPE


_by_ptr: dict[int, Any] = {}  # data_ptr -> weak reference to the simulated tensor there


def tensor_at(ptr: int) -> Any:
    """The live simulated-device tensor whose data starts at `ptr` (an I/O binding's buffer)."""
    ref = _by_ptr.get(ptr)
    t = ref() if ref is not None else None
    if t is None:
        raise RuntimeError(f"no simulated-device tensor at {ptr:#x}")
    return t


def install(torch: Any) -> None:
    """Patch the imported `torch` so that it has one simulated device (cuda:0, or xpu:0)."""
    global DEVICE_TYPE
    sim = device()
    prof = sim.profile
    DEVICE_TYPE = prof.device_type
    cuda_dev = torch.device(DEVICE_TYPE, 0)
    queued = prof.asynchronous  # the host waits for the device only where it must
    # what the host reads of a device tensor's values: it waits for the device first
    host_reads = {"item", "tolist", "__bool__", "__format__", "__repr__", "__float__",
                  "__int__", "equal", "allclose"}  # fmt: skip
    Tensor = torch.Tensor
    real_to = Tensor.to
    disabled = torch._C.DisableTorchFunctionSubclass

    class SimCudaTensor(Tensor):
        """A tensor on the simulated cuda:0 (its data in host memory)."""

        @classmethod
        def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = _name(func)
            if name == "__get__":
                attr = getattr(getattr(func, "__self__", None), "__name__", "")
                if attr == "device":
                    return cuda_dev
                if attr == "is_cuda":
                    return DEVICE_TYPE == "cuda"
                if attr == "is_xpu":
                    return DEVICE_TYPE == "xpu"
                if attr == "is_cpu":
                    return False
            if name == "numpy":
                raise TypeError(
                    f"can't convert {cuda_dev} device type tensor to numpy. Use Tensor.cpu() to copy the "
                    "tensor to host memory first."
                )
            if name in ("cpu", "to") or kwargs.get("device") is not None:
                return _moved(func, name, args, kwargs)
            if queued and name in host_reads:
                sim.drain()
            if name.endswith("__get__") or name in QUIET:
                with disabled():
                    out = func(*args, **kwargs)
                return _wrap(out)
            if (
                name == "zero_"
                and args
                and args[0].dtype == torch.uint8
                and args[0].untyped_storage().nbytes() >= FLUSH_MIN_BYTES
            ):
                return _flush(func, args, kwargs)
            kind = _kind(name)
            if kind == "matmul" and not _tensor_cores(args):
                kind = "matmul_fp32"
            with disabled():
                out = sim.run(name, kind, lambda: func(*args, **kwargs))
            return _wrap(out)

    def _tensor_cores(args: Any) -> bool:
        """A matmul runs on tensor cores in half precision, or in float32 where TF32 is allowed."""
        first = next((a for a in args if isinstance(a, Tensor)), None)
        if first is None or first.dtype in (torch.float16, torch.bfloat16):
            return True
        if first.dtype != torch.float32:
            return False
        # torch 2.9+: cuda.matmul's flag, "none" deferring to the generic one; else the legacy API.
        for flags in (torch.backends.cuda.matmul, torch.backends):
            precision = getattr(flags, "fp32_precision", None)
            if precision in ("tf32", "ieee"):
                return bool(precision == "tf32")
        try:
            return bool(torch.get_float32_matmul_precision() != "highest")
        except RuntimeError:  # the legacy and the new API mixed: torch refuses to say
            return False

    def _flush(func: Any, args: Any, kwargs: Any) -> Any:
        """A byte buffer larger than the L2 zeroed: the cold-cache flush, counted in the ledger.
        Its device time is modelled (nbytes / FLUSH_BYTES_PER_S, the host asleep meanwhile), not
        the host's memset: on a loaded CPU that varied 20-60 ms per 256 MiB from one flush to
        the next, which no GPU's memset does. Nothing reads the buffer, so nothing is written."""
        t0 = sim.now()
        nbytes = args[0].untyped_storage().nbytes()
        busy_s = nbytes / FLUSH_BYTES_PER_S
        sim.run("zero_", "memset", lambda: time.sleep(busy_s), modelled_s=busy_s)
        sim.flushes += 1
        ledger("flush", t0=t0, t1=t0 + busy_s, t_host=sim.now(), nbytes=nbytes)
        return args[0]

    def _plain(t: Any) -> Any:
        return t.as_subclass(Tensor) if isinstance(t, SimCudaTensor) else t

    def _wrap(out: Any) -> Any:
        if (
            isinstance(out, Tensor)
            and not isinstance(out, SimCudaTensor)
            and not isinstance(out, torch.nn.Parameter)
        ):
            return on_device(out)
        if isinstance(out, tuple) and not hasattr(out, "_fields"):
            return tuple(_wrap(o) for o in out)
        if isinstance(out, list):
            return [_wrap(o) for o in out]
        return out

    def on_device(t: Any) -> Any:
        """`t` (host data) as a tensor of the simulated device, its storage counted as allocated."""
        if isinstance(t, SimCudaTensor):
            return t
        nbytes = t.untyped_storage().nbytes()
        if nbytes > sim.free_bytes():
            ledger("out_of_memory", asked=nbytes, allocated=sim.allocated)
            raise torch.OutOfMemoryError(
                f"{'XPU' if DEVICE_TYPE == 'xpu' else 'CUDA'} out of memory. Tried to allocate {nbytes / 2**20:.2f} MiB. GPU 0 has a total "
                f"capacity of {prof.total_memory / 2**30:.2f} GiB of which {sim.free_bytes() / 2**20:.2f} "
                "MiB is free. (simulated device)"
            )
        out = t.as_subclass(SimCudaTensor)
        ptr = t.untyped_storage().data_ptr()
        sim.hold(ptr, nbytes)
        weakref.finalize(out, sim.release, ptr)
        _by_ptr[t.data_ptr()] = weakref.ref(out)
        return out

    def _target(name: str, args: Any, kwargs: Any) -> Any:
        """The device a .to()/.cpu()/factory call names (None: it names none)."""
        if name == "cpu":
            return "cpu"
        if "device" in kwargs:
            return kwargs["device"]
        for a in args[1:] if name == "to" else ():
            if isinstance(a, str | torch.device | int) and not isinstance(a, bool):
                return a
            if isinstance(a, Tensor):
                return a.device
        return None

    def _moved(func: Any, name: str, args: Any, kwargs: Any) -> Any:
        """.to/.cpu/a device= keyword: run on the host data, the result where it was asked to be."""
        target = _target(name, args, kwargs)
        if name == "to":
            args = tuple(
                "cpu" if i and _is_cuda(a) and not isinstance(a, Tensor | bool) else a
                for i, a in enumerate(args)
            )
            args = tuple(torch.device("cpu") if i and isinstance(a, SimCudaTensor) else a
                         for i, a in enumerate(args))  # fmt: skip
        if "device" in kwargs:
            kwargs = {**kwargs, "device": "cpu" if _is_cuda(kwargs["device"]) else kwargs["device"]}
        kwargs.pop("pin_memory", None)
        kind = "copy"
        with disabled():
            out = sim.run(name, kind, lambda: func(*args, **kwargs))
        if target is None or _is_cuda(target):
            return _wrap(out)
        if queued:
            sim.drain()  # a copy to the host waits for the device's work before it
        return _plain(out) if isinstance(out, Tensor) else out

    # -- host tensors moving to the device ------------------------------------------------------
    def to(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self, SimCudaTensor):
            return real_to(self, *args, **kwargs)
        target = _target("to", (self, *args), kwargs)
        if target is not None and _is_cuda(target) and not isinstance(target, Tensor):
            args = tuple("cpu" if _is_cuda(a) and not isinstance(a, Tensor | bool | torch.dtype) else a
                         for a in args)  # fmt: skip
            if "device" in kwargs:
                kwargs = {**kwargs, "device": "cpu"}
            out = sim.run("to", "copy", lambda: real_to(self, *args, **kwargs).clone())
            if queued and not kwargs.get("non_blocking") and not any(a is True for a in args):
                sim.drain()  # from pageable host memory a copy returns once it is done
            return on_device(out)
        if isinstance(target, SimCudaTensor):
            return on_device(sim.run("to", "copy", lambda: real_to(self, *args[1:], **kwargs).clone()))
        return real_to(self, *args, **kwargs)

    def cuda(self: Any, device: Any = None, non_blocking: bool = False, **_: Any) -> Any:
        return to(self, DEVICE_TYPE, non_blocking=non_blocking)

    Tensor.to = to
    setattr(Tensor, DEVICE_TYPE, cuda)  # Tensor.cuda (or Tensor.xpu)
    real_pin = Tensor.pin_memory
    Tensor.pin_memory = lambda self, *a, **k: self  # host memory here is as good as pinned
    Tensor.is_pinned = lambda self, *a, **k: True
    del real_pin

    def factory(real: Any, fname: str) -> Any:
        def make(*args: Any, **kwargs: Any) -> Any:
            dev = kwargs.get("device")
            like = args[0] if fname.endswith("_like") and args else None
            if _is_cuda(dev) or (dev is None and isinstance(like, SimCudaTensor)):
                kwargs = {**kwargs, "device": "cpu"}
                kwargs.pop("pin_memory", None)
                if like is not None:
                    args = (_plain(like), *args[1:])
                with disabled():
                    out = sim.run(fname, _kind(fname), lambda: real(*args, **kwargs))
                return on_device(out)
            kwargs.pop("pin_memory", None) if kwargs.get("pin_memory") else None
            return real(*args, **kwargs)

        make.__name__ = fname
        return make

    for fname in FACTORIES:
        real = getattr(torch, fname, None)
        if real is not None:
            setattr(torch, fname, factory(real, fname))

    _install_device_module(torch, sim, SimCudaTensor)
    if os.environ.get(RUNTIMES_ENV):  # the ONNX Runtime double runs what this "exports"
        from tests.gpu_sim.simruntimes import onnx_export

        torch.onnx.export = onnx_export
    # The environment torch loaded under: HIPBLASLT_ALLOW_TF32 decides TF32 on ROCm (read once,
    # when hipBLASLt makes its first handle), so an AMD test reads what the engine had.
    ledger("device", kind=os.environ.get(KIND_ENV, "h100"), type=DEVICE_TYPE, name=prof.name,
           uuid=prof.uuid, hipblaslt_allow_tf32=os.environ.get("HIPBLASLT_ALLOW_TF32"))  # fmt: skip


class _Stream:
    """torch.cuda.Stream: a new stream gets a handle of its own (cudaStream_t, never 0); the
    default (legacy) stream, which current_stream and default_stream answer, has handle 0."""

    made = 0

    def __init__(self, device: Any = None, priority: int = 0, *, _default: bool = False, **_: Any) -> None:
        self.device = device
        if _default:
            self.cuda_stream = 0
        else:
            _Stream.made += 1
            self.cuda_stream = 0x7F5A00000000 + 0x100 * _Stream.made

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def synchronize(self) -> None:
        device().drain()

    def query(self) -> bool:
        return device().now() >= device().queue_end

    def record_event(self, event: Any = None) -> Any:
        event = event or _Event()
        event.record(self)
        return event


class _Event:
    """torch.cuda.Event (torch.xpu.Event): the simulated H100 runs each kernel as it is issued, so
    an event is reached when it is recorded; a queued device (the XPU) reaches it when the work
    issued before it is done. Its time is the device clock's then. A timing event's records
    go to the ledger ("event_record", with the event's number in order of creation: a step
    timer's start and end events are consecutive numbers)."""

    made = 0

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing
        self.t: float | None = None
        _Event.made += 1
        self.number = _Event.made

    def record(self, stream: Any = None) -> None:
        self.t = device().reached()  # a queued device reaches it once what was issued before is done
        if self.enable_timing:
            ledger("event_record", event_number=self.number, t_record=self.t, t_host=device().now())

    def synchronize(self) -> None:
        if self.t is not None:
            device().drain(self.t)

    def query(self) -> bool:
        return self.t is None or device().now() >= self.t

    def wait(self, stream: Any = None) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.t is None or end.t is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end.t - self.t) * 1e3  # milliseconds, as torch answers


class _Graph:
    """torch.cuda.CUDAGraph: captures nothing; a replay runs no kernel (a limit of the simulation)."""

    def replay(self) -> None:
        pass

    def reset(self) -> None:
        pass


def _install_device_module(torch: Any, sim: Any, tensor_cls: Any) -> None:
    """torch.cuda (NVIDIA's CUDA or AMD's ROCm build) or torch.xpu, answering for the simulated board."""
    prof = sim.profile
    c = torch.xpu if prof.device_type == "xpu" else torch.cuda
    state = {"current": 0, "syncs": 0}
    if prof.device_type == "xpu":
        # torch.xpu.get_device_properties (_XpuDeviceProperties): no major/minor, no L2 size
        props = SimpleNamespace(
            name=prof.name, platform_name="Intel(R) oneAPI Unified Runtime over Level-Zero (simulated)",
            vendor="Intel(R) Corporation", driver_version=prof.driver_version, version="12.60.7",
            type="gpu", total_memory=prof.total_memory, max_compute_units=prof.sms, gpu_eu_count=prof.sms,
            gpu_subslice_count=prof.sms // 8, max_work_group_size=1024, max_num_sub_groups=64,
            sub_group_sizes=[16, 32], has_fp16=True, has_fp64=prof.has_fp64, has_atomic64=True,
            has_bfloat16_conversions=True, has_subgroup_matrix_multiply_accumulate=True,
            has_subgroup_matrix_multiply_accumulate_tensor_float32=False, device_id=0x0BD5,
            uuid=bytes.fromhex(prof.uuid.removeprefix("GPU-").replace("-", "")),
        )  # fmt: skip
    else:
        props = SimpleNamespace(
            name=prof.name, total_memory=prof.total_memory, major=prof.major, minor=prof.minor,
            multi_processor_count=prof.sms, L2_cache_size=prof.l2_bytes,
            uuid=prof.uuid.removeprefix("GPU-"), is_integrated=0, is_multi_gpu_board=0,
            pci_bus_id=0x1b, pci_device_id=0, pci_domain_id=0,
        )  # fmt: skip
        if prof.gcn_arch:  # torch's ROCm build: hipDeviceProp's gcnArchName
            props.gcnArchName = prof.gcn_arch

    def _check(i: Any) -> None:
        idx = 0 if i is None else (i if isinstance(i, int) else getattr(torch.device(i), "index", 0) or 0)
        if idx != 0:
            raise RuntimeError(
                f"{'XPU' if prof.device_type == 'xpu' else 'CUDA'} error: invalid device ordinal"
            )

    def synchronize(device: Any = None) -> None:
        _check(device)
        state["syncs"] += 1
        sim.drain()

    def get_device_properties(device: Any = None) -> Any:
        _check(device)
        return props

    def memory_stats(device: Any = None) -> dict[str, int]:
        a, p = sim.allocated, sim.peak
        return {
            "allocated_bytes.all.current": a, "allocated_bytes.all.peak": p,
            "reserved_bytes.all.current": a, "reserved_bytes.all.peak": p,
            "active_bytes.all.current": a, "active_bytes.all.peak": p, "num_ooms": 0,
        }  # fmt: skip

    @contextlib.contextmanager
    def device_ctx(d: Any) -> Any:
        _check(d)
        yield

    @contextlib.contextmanager
    def stream_ctx(s: Any) -> Any:
        yield

    @contextlib.contextmanager
    def graph(g: Any, pool: Any = None, stream: Any = None, **_: Any) -> Any:
        yield

    def mem_get_info(device: Any = None) -> tuple[int, int]:
        _check(device)
        return sim.free_bytes(), prof.total_memory

    def reset_peak(device: Any = None) -> None:
        _check(device)
        sim.reset_peak()

    patches = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": _check,
        "get_device_name": lambda d=None: prof.name,
        "get_device_capability": lambda d=None: (prof.major, prof.minor),
        "get_device_properties": get_device_properties,
        "synchronize": synchronize,
        "Event": _Event,
        "Stream": _Stream,
        "current_stream": lambda device=None: _Stream(device, _default=True),
        "default_stream": lambda device=None: _Stream(device, _default=True),
        "stream": stream_ctx,
        "device": device_ctx,
        "CUDAGraph": _Graph,
        "graph": graph,
        "is_initialized": lambda: True,
        "init": lambda: None,
        "empty_cache": lambda: None,
        "mem_get_info": mem_get_info,
        "memory_allocated": lambda device=None: sim.allocated,
        "memory_reserved": lambda device=None: sim.allocated,
        "max_memory_allocated": lambda device=None: sim.peak,
        "max_memory_reserved": lambda device=None: sim.peak,
        "reset_peak_memory_stats": reset_peak,
        "reset_max_memory_allocated": reset_peak,
        "memory_stats": memory_stats,
        "is_bf16_supported": lambda *a, **k: True,
    }
    if prof.device_type == "xpu":
        for name in ("get_device_capability", "CUDAGraph", "graph"):
            patches.pop(name)
        patches["get_device_capability"] = lambda d=None: {
            "name": prof.name,
            "driver_version": prof.driver_version,
        }
    for name, value in patches.items():
        setattr(c, name, value)
    if prof.device_type == "cuda" and prof.vendor == "AMD":  # torch's ROCm build
        torch.version.hip = "6.2.41133-gpuplay.sim"
        torch.version.cuda = None
    elif prof.device_type == "cuda":
        torch.version.cuda = "12.8"
    if prof.device_type == "cuda":
        torch.backends.cuda.is_built = lambda: True
    c.SimCudaTensor = tensor_cls  # for a test that wants to tell the simulated tensors apart
