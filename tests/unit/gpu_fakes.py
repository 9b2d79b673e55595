"""Fakes of the GPU libraries at gpuplay's boundary, for tests that run on any CPU machine.

- FakeCuda: torch.cuda's device/stream/graph API, tracking the current device, so a test can
  tell on which device a stream was made, a capture ran or a step was called.
- FakePynvml: a recorded NVML device list (UUIDs, names, MIG instances, processes), with a
  log of every call, so a test can tell which NVML device was read and when.
  GPM (nvidia-ml-py's nvmlGpm* calls) over counters a test advances with `work`: a GPU with
  `arch="hopper"` has them, an Ampere one answers isSupportedDevice = 0, as the driver does.
- FakeCupy: the parts of CuPy whose caches gpuplay empties (pools, pinned pool, cuFFT plans).
- SimStream, install_cuda_run: a whole `runner.run` on "cuda:0" over a CPU torch, its CUDA
  events on a simulated stream clock (host dispatch and device time apart), its allocator's
  peak count and free memory faked, so a test drives the very path a GPU run takes.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any


def _ordinal(device: Any, current: int) -> int:
    if device is None:
        return current
    if isinstance(device, int):
        return device
    text = str(device)
    return int(text.split(":")[1]) if ":" in text else current


# -- torch.cuda ----------------------------------------------------------------------------
@dataclass
class FakeStream:
    device: int
    waits: list[Any] = field(default_factory=list)

    def wait_stream(self, other: Any) -> None:
        self.waits.append(other)


class FakeCuda:
    """torch.cuda as far as graph capture, streams and configured() use it."""

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.current = 0
        self.captures: list[dict[str, Any]] = []  # one per torch.cuda.graph block
        self.streams: list[FakeStream] = []
        self.stream_ctx: list[int] = []  # device of the stream made current by torch.cuda.stream
        self._default = {i: FakeStream(i) for i in range(count)}
        self.sim = SimStream()  # the simulated stream its events time
        self.allocated = 0  # bytes the caching allocator has handed out, the run's inputs
        self.peak = 0
        self.resets = 0  # reset_peak_memory_stats calls
        self.free_bytes = 3 * 2**30  # what mem_get_info answers
        self.emptied = 0

    @contextlib.contextmanager
    def device(self, index: Any) -> Any:
        saved, self.current = self.current, _ordinal(index, self.current)
        try:
            yield
        finally:
            self.current = saved

    def Stream(self, device: Any = None, **_: Any) -> FakeStream:  # noqa: N802 - torch's name
        s = FakeStream(_ordinal(device, self.current))
        self.streams.append(s)
        return s

    def current_stream(self, device: Any = None) -> FakeStream:
        return self._default[_ordinal(device, self.current)]

    @contextlib.contextmanager
    def stream(self, s: FakeStream) -> Any:
        self.stream_ctx.append(s.device)
        yield

    class CUDAGraph:
        def __init__(self) -> None:
            self.replays = 0

        def replay(self) -> None:
            self.replays += 1

    @contextlib.contextmanager
    def graph(self, g: Any, pool: Any = None, stream: FakeStream | None = None, **_: Any) -> Any:
        # torch.cuda.graph's default capture stream is made on the *current* device.
        capture_device = stream.device if stream is not None else self.current
        self.captures.append({"current": self.current, "stream_device": capture_device})
        yield

    def synchronize(self, device: Any = None) -> None:
        self.sim.sync()

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return self.count

    # -- events on the simulated stream, the allocator's counts, free memory -------------------
    def Event(self, enable_timing: bool = False, **_: Any) -> SimEvent:  # noqa: N802 - torch's name
        return SimEvent(self.sim)

    def get_device_properties(self, i: int) -> Any:
        return SimpleNamespace(
            name="NVIDIA H100 80GB HBM3", total_memory=80 * 2**30, major=9, minor=0,
            multi_processor_count=132, L2_cache_size=50 * 2**20, uuid=f"GPU-{i:08x}-fake",
        )  # fmt: skip

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return self.free_bytes, 80 * 2**30

    def empty_cache(self) -> None:
        self.emptied += 1

    def allocate(self, nbytes: int) -> None:
        """A step's transient allocation: the peak counts it, then it is freed."""
        self.peak = max(self.peak, self.allocated + nbytes)

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.resets += 1
        self.peak = self.allocated

    def max_memory_allocated(self, device: Any = None) -> int:
        return self.peak


class SimStream:
    """One CUDA stream on a simulated clock. The host pays each op's dispatch; the device runs ops
    in order, each from when it is issued or when the one before it ends, whichever is later.
    An event records the time the stream reaches it; synchronising moves the host up to it."""

    def __init__(self) -> None:
        self.host = 0.0  # the host's clock, seconds
        self.free = 0.0  # when the device finishes what is queued
        self.flushes = 0  # cold-cache flushes queued (SimBuffer.zero_)

    def launch(self, dispatch_s: float, device_s: float) -> None:
        self.host += dispatch_s
        self.free = max(self.host, self.free) + device_s

    def reached(self) -> float:
        return max(self.host, self.free)

    def sync(self) -> None:
        self.host = self.reached()


class SimEvent:
    def __init__(self, sim: SimStream) -> None:
        self.sim, self.t = sim, 0.0

    def record(self, stream: Any = None) -> None:
        self.t = self.sim.reached()

    def synchronize(self) -> None:
        self.sim.host = max(self.sim.host, self.t)

    def elapsed_time(self, end: SimEvent) -> float:
        return (end.t - self.t) * 1e3  # milliseconds, as torch answers


class SimBuffer:
    """A device buffer (the cold-cache flush's): zeroing it is one long kernel on the stream."""

    FLUSH_S = 100e-6

    def __init__(self, sim: SimStream) -> None:
        self.sim = sim

    def zero_(self) -> SimBuffer:
        self.sim.flushes += 1
        self.sim.launch(2e-6, self.FLUSH_S)
        return self


class CudaTorch:
    """The installed (CPU) torch with torch.cuda replaced by a FakeCuda, and 'cuda' buffers
    made by torch.empty simulated: what TorchBackend reaches through its _torch()."""

    def __init__(self, real: Any, cuda: FakeCuda) -> None:
        self._real, self.cuda = real, cuda

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def empty(self, *size: Any, device: Any = None, **kw: Any) -> Any:
        if str(device).startswith("cuda"):
            return SimBuffer(self.cuda.sim)
        return self._real.empty(*size, device=device, **kw)


# Five small element-wise kernels: 10 µs of Python dispatch each, 2 µs on the device (launch-bound).
LAUNCH_BOUND = ((10e-6, 2e-6),) * 5


def install_cuda_run(
    monkeypatch: Any, cuda: FakeCuda, kernels: Any = LAUNCH_BOUND, on_step: Any = None
) -> None:
    """`runner.run(spec on cuda:0)` through the real runner, planner and torch backend: torch.cuda
    is `cuda`, inputs stay on the host, and each call of the step issues `kernels` (dispatch,
    device seconds) on the simulated stream, then calls `on_step(n)` (n: calls so far)."""
    import torch

    from gpuplay.core.backends import get_backend, torch_backend
    from gpuplay.core.backends.base import Availability, DeviceInfo
    from gpuplay.core.catalogue import planner
    from gpuplay.core.runner import steps

    proxy = CudaTorch(torch, cuda)
    monkeypatch.setattr(torch_backend, "_torch", lambda: proxy)
    backend = get_backend("torch")
    devices = [DeviceInfo("cpu", "cpu"), DeviceInfo("cuda:0", "NVIDIA H100 80GB HBM3", 80 * 2**30)]
    monkeypatch.setattr(backend, "probe", lambda timeout=None: (Availability(True), devices))
    monkeypatch.setattr(planner, "device_refusal", lambda *a, **k: None)
    real_from_host = torch_backend.TorchBackend.from_host
    monkeypatch.setattr(
        torch_backend.TorchBackend,
        "from_host",
        lambda self, h, device, dtype: real_from_host(self, h, "cpu", dtype),
    )
    real_build = steps.build_step
    calls = itertools.count(1)

    def build(*a: Any, **k: Any) -> Any:
        step = real_build(*a, **k)

        def on_device() -> Any:
            out = step()
            for dispatch, device_s in kernels:
                cuda.sim.launch(dispatch, device_s)
            if on_step is not None:
                on_step(next(calls))
            return out

        return on_device

    monkeypatch.setattr(steps, "build_step", build)


MIXED = "you have used mix of the legacy and new APIs"  # ATen's words (Context.cpp), in short


class _Matmul:
    """torch.backends.cuda.matmul: fp32_precision (new API) and allow_tf32 (legacy), whose getter
    raises where the two disagree, as ATen's allowTF32CuBLAS does."""

    def __init__(self, prec: FakePrecision) -> None:
        self._p, self.fp32_precision = prec, "none"

    @property
    def allow_tf32(self) -> bool:
        legacy = self._p.legacy != "highest"
        if legacy != (self.fp32_precision == "tf32"):
            raise RuntimeError(f"checking whether allow_tf32_new is enabled for cuBlas matmul: {MIXED}")
        return legacy


class _Cudnn:
    """torch.backends.cudnn: fp32_precision, conv and rnn (new), allow_tf32 (legacy; its getter
    raises where conv, rnn and the legacy flag disagree, as allowTF32CuDNN does)."""

    def __init__(self) -> None:
        self.fp32_precision, self._legacy = "none", True
        self.conv, self.rnn = SimpleNamespace(fp32_precision="tf32"), SimpleNamespace(fp32_precision="tf32")

    @property
    def allow_tf32(self) -> bool:
        conv, rnn = self.conv.fp32_precision == "tf32", self.rnn.fp32_precision == "tf32"
        if not conv == rnn == self._legacy:
            raise RuntimeError(f"checking whether allow_tf32 is enabled for cuDNN: {MIXED}")
        return self._legacy

    @allow_tf32.setter
    def allow_tf32(self, on: bool) -> None:
        self._legacy = bool(on)
        self.conv.fp32_precision = self.rnn.fp32_precision = "tf32" if on else "ieee"


class FakePrecision:
    """torch 2.9+'s two precision APIs over one state: set_float32_matmul_precision (legacy, which
    also sets the new cuda.matmul flag) and the fp32_precision attributes (new); a legacy getter
    raises where the new API was set to something the legacy one does not say (torch 2.13)."""

    def __init__(self) -> None:
        self.legacy = "highest"
        self.matmul, self.cudnn = _Matmul(self), _Cudnn()

    def get_float32_matmul_precision(self) -> str:
        if self.matmul.fp32_precision == "tf32" and self.legacy == "highest":
            raise RuntimeError(f"checking the matmul precision without a specific backend name: {MIXED}")
        return self.legacy

    def set_float32_matmul_precision(self, precision: str) -> None:
        self.legacy = precision
        self.matmul.fp32_precision = "ieee" if precision == "highest" else "tf32"


def fake_torch(cuda: FakeCuda) -> Any:
    """A torch module for TorchBackend's graph and configured() paths (threads, precision flags)."""
    state = {"threads": 2}
    prec = FakePrecision()
    backends = SimpleNamespace(
        cuda=SimpleNamespace(matmul=prec.matmul, preferred_linalg_library=lambda *a: None),
        cudnn=prec.cudnn,
    )
    return SimpleNamespace(
        cuda=cuda,
        backends=backends,
        get_float32_matmul_precision=prec.get_float32_matmul_precision,
        set_float32_matmul_precision=prec.set_float32_matmul_precision,
        get_num_threads=lambda: state["threads"],
        set_num_threads=lambda n: state.update(threads=n),
    )


# -- NVML ------------------------------------------------------------------------------------
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801 - pynvml's name (a driver without the call)
    pass


NVML_ERROR_NOT_SUPPORTED = 3  # nvmlReturn_t


class FakeGpmSample:
    """An NVML GPM sample buffer: the counters of one device (or MIG instance) at one moment."""

    def __init__(self) -> None:
        self.key: tuple[int, int | None] | None = None
        self.t = 0.0
        self.counts: dict[int, float] = {}


class FakeGpmMetric:
    def __init__(self) -> None:
        self.metricId, self.nvmlReturn, self.value = 0, 0, 0.0


class FakeGpmMetricsGet:
    """c_nvmlGpmMetricsGet_t: version, numMetrics, sample1, sample2, metrics[NVML_GPM_METRIC_MAX]."""

    def __init__(self) -> None:
        self.version, self.numMetrics = 0, 0
        self.sample1: FakeGpmSample | None = None
        self.sample2: FakeGpmSample | None = None
        self.metrics = [FakeGpmMetric() for _ in range(98)]


@dataclass
class FakeGpu:
    uuid: str
    name: str
    util: int = 50
    power_mw: int = 300_000
    power_limit_mw: int = 700_000
    mig: list[str] = field(default_factory=list)  # MIG instance UUIDs (MIG mode on when any)
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)
    arch: str = "hopper"  # GPM counters from Hopper on
    gpm_mig: bool = True  # the driver samples GPM per MIG instance (nvmlGpmMigSampleGet)
    gpm_absent: tuple[int, ...] = ()  # GPM metric ids this board lacks (NVLink on a PCIe card)


@dataclass(frozen=True)
class _Handle:
    gpu: int
    mig: int | None = None


class FakePynvml:
    """pynvml over a recorded device list (NVML's order); every call is logged with its time."""

    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_PCIE_UTIL_TX_BYTES = 0
    NVML_PCIE_UTIL_RX_BYTES = 1
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    # nvidia-ml-py's GPM constants (the values of nvml.h's nvmlGpmMetricId_t)
    NVML_GPM_METRICS_GET_VERSION = 1
    NVML_GPM_METRIC_SM_UTIL = 2
    NVML_GPM_METRIC_SM_OCCUPANCY = 3
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5
    NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6
    NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7
    NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10
    NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
    NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
    NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60
    NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61
    c_nvmlGpmMetricsGet_t = FakeGpmMetricsGet

    def __init__(self, gpus: list[FakeGpu], gpm_driver: bool = True) -> None:
        self.gpus = gpus
        self.calls: list[tuple[float, str]] = []
        self._energy = itertools.count(1_000_000, 50_000)
        self.gpm_driver = gpm_driver  # False: a driver older than R520, without the GPM calls
        self.gpm_clock = 100.0  # the GPU's own time, advanced by `work` and by real time (`now`)
        self._real_mark = time.monotonic()
        self.gpm_counts: dict[tuple[int, int | None], dict[int, float]] = {}
        self.gpm_live: set[int] = set()  # ids of sample buffers not yet freed
        self._steady: dict[int, tuple[dict[int, float], float]] = {}  # gpu -> (activity, since)

    def busy(self, gpu: int, activity: dict[int, float]) -> None:
        """The device busy at `activity` from now on, in real time (for a run through the runner)."""
        self.now()  # the time before this is not busy time
        self._steady[gpu] = (activity, time.monotonic())

    def now(self) -> float:
        """The GPU's clock: the simulated `work` plus the real time that passed (busy devices
        counting over it). gpuplay's GPM code reads its window from this clock (install_nvml),
        so a simulated second is a second to both sides, as it is on a real GPU."""
        real = time.monotonic()
        elapsed, self._real_mark = max(0.0, real - self._real_mark), real
        if not self._steady:
            return self.gpm_clock  # only simulated `work` so far: real time is not GPU time yet
        self.gpm_clock += elapsed
        for gpu, (activity, _since) in self._steady.items():
            self._count(gpu, elapsed, activity, None)
        return self.gpm_clock

    # -- GPM ---------------------------------------------------------------------------------
    def work(self, gpu: int, seconds: float, activity: dict[int, float], mig: int | None = None) -> None:
        """The device busy for `seconds` at `activity` (metric id -> % or MiB/s): counters grow."""
        self.now()
        self.gpm_clock += seconds
        self._count(gpu, seconds, activity, mig)

    def _count(self, gpu: int, seconds: float, activity: dict[int, float], mig: int | None) -> None:
        for key in {(gpu, None), (gpu, mig)}:
            counts = self.gpm_counts.setdefault(key, {})
            for metric, rate in activity.items():
                counts[metric] = counts.get(metric, 0.0) + rate * seconds

    def _gpm_check(self, fn: str) -> None:
        self._log(fn)
        if not self.gpm_driver:
            raise NVMLError_FunctionNotFound(fn)

    def nvmlGpmQueryDeviceSupport(self, h: _Handle) -> Any:  # noqa: N802
        self._gpm_check("nvmlGpmQueryDeviceSupport")
        supported = self.gpus[h.gpu].arch in ("hopper", "blackwell")
        return SimpleNamespace(version=1, isSupportedDevice=int(supported))

    def nvmlGpmSampleAlloc(self) -> FakeGpmSample:  # noqa: N802
        self._gpm_check("nvmlGpmSampleAlloc")
        s = FakeGpmSample()
        self.gpm_live.add(id(s))
        return s

    def nvmlGpmSampleFree(self, s: FakeGpmSample) -> None:  # noqa: N802
        self.gpm_live.discard(id(s))

    def _fill(self, s: FakeGpmSample, key: tuple[int, int | None]) -> FakeGpmSample:
        if self.gpus[key[0]].arch not in ("hopper", "blackwell"):
            raise NVMLError_NotSupported("nvmlGpmSampleGet")
        s.key, s.t = key, self.now()
        s.counts = dict(self.gpm_counts.get(key, {}))
        return s

    def nvmlGpmSampleGet(self, h: _Handle, s: FakeGpmSample) -> FakeGpmSample:  # noqa: N802
        self._gpm_check("nvmlGpmSampleGet")
        return self._fill(s, (h.gpu, None))

    def nvmlGpmMigSampleGet(self, h: _Handle, gi: int, s: FakeGpmSample) -> FakeGpmSample:  # noqa: N802
        self._gpm_check("nvmlGpmMigSampleGet")
        if not self.gpus[h.gpu].gpm_mig:
            raise NVMLError_NotSupported("nvmlGpmMigSampleGet")
        return self._fill(s, (h.gpu, gi))

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:  # noqa: N802
        if h.mig is None:
            raise NVMLError("Invalid Argument")
        return h.mig

    def nvmlGpmMetricsGet(self, mg: FakeGpmMetricsGet) -> FakeGpmMetricsGet:  # noqa: N802
        self._gpm_check("nvmlGpmMetricsGet")
        s1, s2 = mg.sample1, mg.sample2
        if mg.version != 1 or s1 is None or s2 is None or s1.key != s2.key or s2.t <= s1.t:
            raise NVMLError("Invalid Argument")
        absent = self.gpus[s1.key[0]].gpm_absent
        # NVML: the two nvmlGpmSampleGet calls "must be greater than 100 ms" apart (the counters'
        # refresh). Closer, both samples hold the same counters: every metric reads as idle.
        stale = s2.t - s1.t <= 0.1
        for m in mg.metrics[: mg.numMetrics]:
            if m.metricId in absent:
                m.nvmlReturn, m.value = NVML_ERROR_NOT_SUPPORTED, 0.0
            elif stale:
                m.nvmlReturn, m.value = 0, 0.0
            else:
                m.nvmlReturn = 0
                m.value = (s2.counts.get(m.metricId, 0.0) - s1.counts.get(m.metricId, 0.0)) / (s2.t - s1.t)
        return mg

    def _log(self, name: str) -> None:
        self.calls.append((time.monotonic(), name))

    def calls_between(self, t0: float, t1: float, name: str) -> int:
        return sum(1 for t, n in self.calls if t0 <= t <= t1 and n == name)

    def nvmlInit(self) -> None:  # noqa: N802
        pass

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Handle:  # noqa: N802
        self._log("nvmlDeviceGetHandleByIndex")
        if not 0 <= i < len(self.gpus):
            raise NVMLError("Invalid Argument")
        return _Handle(i)

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:  # noqa: N802
        g = self.gpus[h.gpu]
        return g.uuid if h.mig is None else g.mig[h.mig]

    def nvmlDeviceGetName(self, h: _Handle) -> str:  # noqa: N802
        return self.gpus[h.gpu].name

    def nvmlDeviceGetMigMode(self, h: _Handle) -> tuple[int, int]:  # noqa: N802
        on = int(bool(self.gpus[h.gpu].mig))
        return on, on

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:  # noqa: N802
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, j: int) -> _Handle:  # noqa: N802
        if j >= len(self.gpus[h.gpu].mig):
            raise NVMLError("Not Found")
        return _Handle(h.gpu, j)

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:  # noqa: N802
        self._log("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=self.gpus[h.gpu].util, memory=10)

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> Any:  # noqa: N802
        return SimpleNamespace(used=2**30, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:  # noqa: N802
        return self.gpus[h.gpu].power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:  # noqa: N802
        return self.gpus[h.gpu].power_limit_mw

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return getattr(self, "driver", "580.95.05")

    def nvmlDeviceGetTotalEnergyConsumption(self, h: _Handle) -> int:  # noqa: N802
        return next(self._energy)

    def nvmlDeviceGetPcieThroughput(self, h: _Handle, counter: int) -> int:  # noqa: N802
        self._log("nvmlDeviceGetPcieThroughput")
        time.sleep(0.02)  # NVML samples the counter over ~20 ms
        return 1024

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[Any]:  # noqa: N802
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.gpus[h.gpu].procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: _Handle) -> list[Any]:  # noqa: N802
        return []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("nvml"):  # a query this board does not support

            def unsupported(*_: Any) -> Any:
                raise NVMLError_NotSupported(name)

            return unsupported
        raise AttributeError(name)


def install_nvml(monkeypatch: Any, fake: FakePynvml) -> None:
    """Make telemetry's NVML wrapper answer from `fake`."""
    from gpuplay.core.measure import telemetry

    state = telemetry._NVML()
    state._tried, state._pynvml = True, fake
    monkeypatch.setattr(telemetry, "nvml", state)
    from gpuplay.core.hw import nvidia

    monkeypatch.setattr(nvidia, "now", fake.now)  # GPM windows timed on the fake GPU's clock


def install_cuda_uuids(monkeypatch: Any, uuids: list[str]) -> None:
    """torch.cuda seeing len(uuids) devices with these UUIDs (in CUDA's order)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(uuids))
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid=uuids[i], name=f"dev{i}")
    )


# -- CuPy ------------------------------------------------------------------------------------
class FakeCupy:
    """cupy's device context, pools and cuFFT plan caches, logging what was freed on which device."""

    def __init__(self) -> None:
        self.current = 0
        self.freed: list[tuple[str, int | None]] = []
        fake = self

        class Device:
            def __init__(self, index: int = 0) -> None:
                self.id = index
                self._saved: list[int] = []

            def __enter__(self) -> Device:
                self._saved.append(fake.current)
                fake.current = self.id
                return self

            def __exit__(self, *exc: Any) -> None:
                fake.current = self._saved.pop()

        class Pool:
            def __init__(self, kind: str) -> None:
                self.kind = kind

            def free_all_blocks(self) -> None:
                fake.freed.append((self.kind, fake.current if self.kind == "device" else None))

        class PlanCache:
            def clear(self) -> None:
                fake.freed.append(("fft-plans", fake.current))

        self._pool, self._pinned = Pool("device"), Pool("pinned")
        self.cuda = SimpleNamespace(Device=Device, memory=SimpleNamespace(OutOfMemoryError=MemoryError))
        self.fft = SimpleNamespace(config=SimpleNamespace(get_plan_cache=PlanCache))
        self.__version__ = "13.6.0"

    def get_default_memory_pool(self) -> Any:
        return self._pool

    def get_default_pinned_memory_pool(self) -> Any:
        return self._pinned


# -- AMD: ROCm torch and amdsmi --------------------------------------------------------------
@dataclass
class FakeAmdGpu:
    """One AMD GPU as torch (ROCm) and amdsmi both see it."""

    name: str  # torch's and amdsmi's market name
    arch: str  # torch's gcnArchName, e.g. "gfx942:sramecc+:xnack-"
    bus: int  # PCI bus number: what maps torch's device to amdsmi's
    uuid: str
    gfx: int = 80  # amdsmi's gfx_activity, %
    watts: float = 600.0
    vram_used_mb: int = 4096
    vram_total_mb: int = 196_608


class AmdSmiLibraryException(Exception):  # noqa: N818 - amdsmi's name
    pass


class FakeAmdsmi:
    """The `amdsmi` module (its Python API: amdsmi_init, handles, dicts with 'N/A' strings) over
    GPUs listed in amdsmi's order; the energy accumulator advances 1000 ticks of 15.3 µJ per read."""

    class AmdSmiClkType:
        GFX, MEM = 1, 5

    class AmdSmiTemperatureType:
        EDGE, HOTSPOT, JUNCTION = 0, 1, 1

    class AmdSmiTemperatureMetric:
        CURRENT = 0

    AmdSmiLibraryException = AmdSmiLibraryException

    def __init__(self, gpus: list[FakeAmdGpu], init_error: bool = False) -> None:
        self.gpus, self.init_error = gpus, init_error
        self.ticks = [10_000_000 * (i + 1) for i in range(len(gpus))]
        self.calls: list[str] = []

    def amdsmi_init(self, *flags: Any) -> None:
        if self.init_error:
            raise AmdSmiLibraryException("AMDSMI_STATUS_DRIVER_NOT_LOADED")

    def amdsmi_get_processor_handles(self) -> list[int]:
        return list(range(len(self.gpus)))

    def amdsmi_get_gpu_device_bdf(self, h: int) -> str:
        return f"0000:{self.gpus[h].bus:02x}:00.0"

    def amdsmi_get_gpu_device_uuid(self, h: int) -> str:
        return self.gpus[h].uuid

    def amdsmi_get_gpu_asic_info(self, h: int) -> dict[str, Any]:
        return {"market_name": self.gpus[h].name, "target_graphics_version": self.gpus[h].arch.split(":")[0]}

    def amdsmi_get_gpu_activity(self, h: int) -> dict[str, Any]:
        self.calls.append(f"activity {h}")
        return {"gfx_activity": self.gpus[h].gfx, "umc_activity": 20, "mm_activity": "N/A"}

    def amdsmi_get_gpu_vram_usage(self, h: int) -> dict[str, Any]:
        return {"vram_total": self.gpus[h].vram_total_mb, "vram_used": self.gpus[h].vram_used_mb}

    def amdsmi_get_power_info(self, h: int) -> dict[str, Any]:
        # MI300: average_socket_power is 'N/A', current_socket_power carries the figure
        return {"current_socket_power": self.gpus[h].watts, "average_socket_power": "N/A", "power_limit": 750}

    def amdsmi_get_temp_metric(self, h: int, sensor: int, metric: int) -> int:
        if sensor == self.AmdSmiTemperatureType.EDGE:
            raise AmdSmiLibraryException("AMDSMI_STATUS_NOT_SUPPORTED")  # MI300 has no edge sensor
        return 61

    def amdsmi_get_clock_info(self, h: int, kind: int) -> dict[str, Any]:
        return {"clk": 2100 if kind == self.AmdSmiClkType.GFX else 1300, "max_clk": 2100, "min_clk": 500}

    def amdsmi_get_energy_count(self, h: int) -> dict[str, Any]:
        self.ticks[h] += 1000
        return {"energy_accumulator": self.ticks[h], "counter_resolution": 15.3, "timestamp": 0}


def install_rocm(monkeypatch: Any, gpus: list[FakeAmdGpu], amdsmi: FakeAmdsmi | None) -> None:
    """torch as its ROCm build sees `gpus` (in torch's order) and, when given, the amdsmi module."""
    import sys

    import torch

    from gpuplay.core.hw import amd

    monkeypatch.setattr(torch.version, "hip", "6.2.41133-dd7f95766")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))

    def props(i: int) -> Any:
        g = gpus[i]
        return SimpleNamespace(name=g.name, gcnArchName=g.arch, uuid=g.uuid, major=9, minor=4,
                               multi_processor_count=304, total_memory=g.vram_total_mb * 2**20,
                               pci_domain_id=0, pci_bus_id=g.bus, pci_device_id=0)  # fmt: skip

    monkeypatch.setattr(torch.cuda, "get_device_properties", props)
    if amdsmi is not None:
        monkeypatch.setitem(sys.modules, "amdsmi", amdsmi)
    else:
        monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
        monkeypatch.setattr(amd, "installed", lambda: False)
    monkeypatch.setattr(amd, "smi", amd._AMDSMI())  # initialised afresh against this module


# -- Intel XPU and Apple MPS through torch ------------------------------------------------------
class FakeDeviceEvent:
    """torch.xpu.Event / torch.mps.Event: record, synchronize, elapsed_time (ms)."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()
        FakeDeviceEvent.log.append("record")

    def synchronize(self) -> None:
        FakeDeviceEvent.log.append("synchronize")

    def elapsed_time(self, end: FakeDeviceEvent) -> float:
        return (end.t - self.t) * 1e3


def install_xpu(
    monkeypatch: Any, name: str = "Intel(R) Data Center GPU Max 1550", has_fp64: bool = True
) -> None:
    """torch.xpu with one device; memory counters torch would give."""
    import torch

    x = torch.xpu
    monkeypatch.setattr(x, "is_available", lambda: True)
    monkeypatch.setattr(x, "device_count", lambda: 1)
    monkeypatch.setattr(x, "get_device_properties", lambda i=0: SimpleNamespace(
        name=name, total_memory=64 * 2**30, has_fp64=has_fp64, driver_version="1.3.30049"))  # fmt: skip
    monkeypatch.setattr(x, "memory_allocated", lambda d=None: 3 * 2**30)
    monkeypatch.setattr(x, "memory_reserved", lambda d=None: 4 * 2**30)
    monkeypatch.setattr(x, "max_memory_allocated", lambda d=None: 5 * 2**30)
    monkeypatch.setattr(x, "reset_peak_memory_stats", lambda d=None: None)
    monkeypatch.setattr(x, "synchronize", lambda d=None: FakeDeviceEvent.log.append("xpu.synchronize"))
    monkeypatch.setattr(x, "Event", FakeDeviceEvent)


def install_mps(monkeypatch: Any, chip: str = "Apple M2 Pro") -> None:
    """torch.backends.mps available on a Mac named `chip`; torch.mps's memory counters and events."""
    import torch

    from gpuplay.core.hw import apple

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "current_allocated_memory", lambda: 768 * 2**20)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 1536 * 2**20)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: FakeDeviceEvent.log.append("mps.synchronize"))
    monkeypatch.setattr(torch.mps, "Event", FakeDeviceEvent)
    monkeypatch.setattr(apple.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(apple.subprocess, "run", lambda *a, **k: SimpleNamespace(stdout=chip + "\n"))


def route_device_to_host(monkeypatch: Any, kind: str, free: int = 256 * 2**20) -> None:
    """A fake `kind` ('xpu', 'mps' or 'cuda' under a fake ROCm torch) GPU that computes: torch's factories place its tensors on
    the host (this torch has no such device), so every op after them runs for real, timed by the
    fake events. The module gains the memory calls the roofline probes make, as torch documents
    them (torch.xpu.mem_get_info → (free, total); torch.mps.recommended_max_memory → bytes)."""
    import torch

    def on_host(factory: Any) -> Any:
        def make(*args: Any, device: Any = None, **kw: Any) -> Any:
            if device is not None and str(device).startswith(kind):
                device = "cpu"
            return factory(*args, device=device, **kw)

        return make

    for name in ("ones", "full", "randn"):
        monkeypatch.setattr(torch, name, on_host(getattr(torch, name)))
    mod = getattr(torch, kind)
    monkeypatch.setattr(mod, "empty_cache", lambda: FakeDeviceEvent.log.append(f"{kind}.empty_cache"))
    if kind == "cuda":  # torch.cuda as ROCm's build times it: HIP events behind the cuda API
        monkeypatch.setattr(mod, "Event", FakeDeviceEvent)
    if kind in ("xpu", "cuda"):
        monkeypatch.setattr(mod, "set_device", lambda d: None)
        monkeypatch.setattr(mod, "mem_get_info", lambda d=None: (free, 64 * 2**30))
    else:
        monkeypatch.setattr(mod, "recommended_max_memory", lambda: free + 1536 * 2**20)


def install_cupy_rocm(monkeypatch: Any, gpus: list[tuple[str, str]], hip_version: int = 60241133) -> Any:
    """CuPy's ROCm build as its documented API shows it: `cupy.cuda.runtime.is_hip` True,
    hipDeviceProp dicts (bytes name and gcnArchName), runtimeGetVersion the HIP_VERSION number.
    Installed as `cupy` and re-probed in the registry's CuPy backend, which it returns."""
    import sys

    from gpuplay.core.backends import get_backend
    from gpuplay.core.backends.cupy_backend import CupyBackend

    props = [
        {"name": name.encode(), "gcnArchName": arch.encode(), "totalGlobalMem": 192 * 2**30}
        for name, arch in gpus
    ]
    runtime = SimpleNamespace(
        is_hip=True,
        getDeviceCount=lambda: len(props),
        getDeviceProperties=lambda i: props[i],
        runtimeGetVersion=lambda: hip_version,
    )
    monkeypatch.setitem(
        sys.modules, "cupy", SimpleNamespace(__version__="13.3.0", cuda=SimpleNamespace(runtime=runtime))
    )
    backend = get_backend("cupy")
    monkeypatch.setattr(backend, "_probe_result", CupyBackend().probe(30))
    return backend


def accept_every_probe(monkeypatch: Any) -> None:
    """A calibration on a fake device keeps what each probe measured: these tests are about the
    device's plumbing (its events, names, dtypes), not whether a tiny budget reached a peak."""
    from gpuplay.core.measure import roofline

    real = roofline._best

    def best(run_once: Any, budget_s: float, max_repeats: int = 10, min_repeats: int = 3) -> Any:
        return real(run_once, float("inf"), min_repeats, min_repeats)

    monkeypatch.setattr(roofline, "_best", best)
    monkeypatch.setattr(roofline, "_not_a_peak", lambda *args: "")
    # A GPU's sizes (n from 1024) on the host's emulated half precision took 6 s a calibration;
    # the plumbing is the same at n=64-128.
    matmul_peak = roofline._matmul_peak

    def small_peak(make: Any, n0: int, n_max: int, *args: Any, **kw: Any) -> Any:
        return matmul_peak(make, min(n0, 64), min(n_max, 128), *args, **kw)

    monkeypatch.setattr(roofline, "_matmul_peak", small_peak)


class FakeSessionOptions:
    """onnxruntime.SessionOptions: its attributes and its config entries (add_session_config_entry)."""

    def __init__(self) -> None:
        self.graph_optimization_level = None
        self.intra_op_num_threads = 0
        self.entries: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.entries[key] = value
