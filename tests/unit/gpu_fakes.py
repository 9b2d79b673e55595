"""Fakes of the GPU libraries at gpuplay's boundary, for tests that run on any CPU machine.

- FakeCuda: torch.cuda's device/stream/graph API, tracking the current device, so a test can
  tell on which device a stream was made, a capture ran or a step was called.
- FakePynvml: a recorded NVML device list (UUIDs, names, MIG instances, processes), with a
  log of every call, so a test can tell which NVML device was read and when.
- FakeCupy: the parts of CuPy whose caches gpuplay empties (pools, pinned pool, cuFFT plans).
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
        pass

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return self.count


def fake_torch(cuda: FakeCuda) -> Any:
    """A torch module for TorchBackend's graph and configured() paths (threads, precision flags)."""
    state = {"threads": 2}
    matmul = SimpleNamespace(fp32_precision="none")
    conv = SimpleNamespace(fp32_precision="tf32")
    backends = SimpleNamespace(
        cuda=SimpleNamespace(matmul=matmul, preferred_linalg_library=lambda *a: None),
        cudnn=SimpleNamespace(conv=conv, allow_tf32=True),
    )
    return SimpleNamespace(
        cuda=cuda,
        backends=backends,
        get_num_threads=lambda: state["threads"],
        set_num_threads=lambda n: state.update(threads=n),
    )


# -- NVML ------------------------------------------------------------------------------------
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
    pass


@dataclass
class FakeGpu:
    uuid: str
    name: str
    util: int = 50
    power_mw: int = 300_000
    mig: list[str] = field(default_factory=list)  # MIG instance UUIDs (MIG mode on when any)
    procs: list[tuple[int, int]] = field(default_factory=list)  # (pid, used bytes)


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

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.calls: list[tuple[float, str]] = []
        self._energy = itertools.count(1_000_000, 50_000)

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
    from gpuplay.core import telemetry

    state = telemetry._NVML()
    state._tried, state._pynvml = True, fake
    monkeypatch.setattr(telemetry, "nvml", state)


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
