"""GPU telemetry through NVML and host telemetry through psutil, sampled in a thread.

Every NVML query answers None ("n/a") when it fails, never an exception: one
unsupported field (power on some boards, PCIe counters in a VM) must not take
the panel down. NVML is initialised on first use; when it cannot be (no library,
no driver) `nvml_status()` gives that one clear line.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from gpuplay.core import noise

NA = "n/a"


# -- NVML ------------------------------------------------------------------------
class _NVML:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tried = False
        self._error: str | None = None
        self._pynvml: Any = None

    def ensure(self) -> str | None:
        """Initialise once; return the reason NVML is unusable, or None."""
        with self._lock:
            if not self._tried:
                self._tried = True
                try:
                    import pynvml

                    pynvml.nvmlInit()
                    self._pynvml = pynvml
                except ImportError:
                    self._error = "NVML unavailable: nvidia-ml-py is not installed"
                except Exception as exc:  # pynvml.NVMLError_* : library not found, driver not loaded...
                    self._error = f"NVML unavailable: {_nvml_error_text(exc)}"
            return self._error

    def call(self, name: str, *args: Any) -> Any:
        """pynvml.<name>(*args), or None when it fails or NVML is unavailable."""
        if self.ensure() is not None:
            return None
        try:
            return getattr(self._pynvml, name)(*args)
        except Exception:
            return None

    @property
    def module(self) -> Any:
        return self._pynvml


def _nvml_error_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    hints = {
        "LibraryNotFound": "the NVIDIA driver library (libnvidia-ml.so) was not found: no NVIDIA driver installed",
        "DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
        "NoPermission": "no permission to query the GPU",
    }
    for key, hint in hints.items():
        if key in type(exc).__name__:
            return f"{hint} ({type(exc).__name__})"
    return f"{text} ({type(exc).__name__})"


nvml = _NVML()


def nvml_status() -> str:
    """'' when NVML works, else one line saying why not."""
    return nvml.ensure() or ""


def gpu_count() -> int:
    return nvml.call("nvmlDeviceGetCount") or 0


@dataclass
class GpuSnapshot:
    index: int
    name: str | None = None
    util_gpu: float | None = None  # percent
    util_mem: float | None = None  # percent of time the memory controller was busy
    mem_used: int | None = None
    mem_total: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_tx_mbs: float | None = None
    pcie_rx_mbs: float | None = None
    pstate: str | None = None
    process_mem: int | None = None  # this process's GPU memory
    energy_mj: int | None = None  # total since driver load, where the GPU counts it
    throttle_reasons: int | None = None  # NVML clock-event reason bits (see core/noise.py)


def query_gpu(index: int) -> GpuSnapshot:
    h = nvml.call("nvmlDeviceGetHandleByIndex", index)
    snap = GpuSnapshot(index)
    if h is None:
        return snap
    pm = nvml.module
    name = nvml.call("nvmlDeviceGetName", h)
    snap.name = name.decode() if isinstance(name, bytes) else name
    util = nvml.call("nvmlDeviceGetUtilizationRates", h)
    if util is not None:
        snap.util_gpu, snap.util_mem = float(util.gpu), float(util.memory)
    mem = nvml.call("nvmlDeviceGetMemoryInfo", h)
    if mem is not None:
        snap.mem_used, snap.mem_total = int(mem.used), int(mem.total)
    power = nvml.call("nvmlDeviceGetPowerUsage", h)
    snap.power_w = power / 1000.0 if power is not None else None
    limit = nvml.call("nvmlDeviceGetEnforcedPowerLimit", h)
    snap.power_limit_w = limit / 1000.0 if limit is not None else None
    snap.temp_c = nvml.call("nvmlDeviceGetTemperature", h, pm.NVML_TEMPERATURE_GPU)
    snap.sm_clock_mhz = nvml.call("nvmlDeviceGetClockInfo", h, pm.NVML_CLOCK_SM)
    snap.sm_clock_max_mhz = nvml.call("nvmlDeviceGetMaxClockInfo", h, pm.NVML_CLOCK_SM)
    snap.mem_clock_mhz = nvml.call("nvmlDeviceGetClockInfo", h, pm.NVML_CLOCK_MEM)
    snap.mem_clock_max_mhz = nvml.call("nvmlDeviceGetMaxClockInfo", h, pm.NVML_CLOCK_MEM)
    snap.pcie_gen = nvml.call("nvmlDeviceGetCurrPcieLinkGeneration", h)
    snap.pcie_width = nvml.call("nvmlDeviceGetCurrPcieLinkWidth", h)
    tx = nvml.call("nvmlDeviceGetPcieThroughput", h, pm.NVML_PCIE_UTIL_TX_BYTES)
    rx = nvml.call("nvmlDeviceGetPcieThroughput", h, pm.NVML_PCIE_UTIL_RX_BYTES)
    snap.pcie_tx_mbs = tx / 1024.0 if tx is not None else None  # NVML reports KB/s
    snap.pcie_rx_mbs = rx / 1024.0 if rx is not None else None
    pstate = nvml.call("nvmlDeviceGetPerformanceState", h)
    snap.pstate = f"P{pstate}" if pstate is not None else None
    snap.energy_mj = nvml.call("nvmlDeviceGetTotalEnergyConsumption", h)
    snap.throttle_reasons = nvml.call("nvmlDeviceGetCurrentClocksEventReasons", h)
    if snap.throttle_reasons is None:  # the older name, on older drivers and bindings
        snap.throttle_reasons = nvml.call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    procs = nvml.call("nvmlDeviceGetComputeRunningProcesses", h) or []
    pid = os.getpid()
    used = [p.usedGpuMemory for p in procs if p.pid == pid and p.usedGpuMemory is not None]
    snap.process_mem = sum(used) if used else (0 if procs is not None and snap.mem_used is not None else None)
    return snap


# -- host ------------------------------------------------------------------------
@dataclass
class HostSnapshot:
    cpu_percent: list[float] = field(default_factory=list)  # per core
    mem_used: int = 0
    mem_total: int = 0
    process_rss: int = 0
    engine_rss: int | None = None  # the measurement engine's, when the front end has one

    @property
    def cpu_mean(self) -> float:
        return sum(self.cpu_percent) / len(self.cpu_percent) if self.cpu_percent else 0.0


_process = psutil.Process()


def query_host(engine_pid: int | None = None) -> HostSnapshot:
    vm = psutil.virtual_memory()
    return HostSnapshot(
        cpu_percent=psutil.cpu_percent(percpu=True),
        mem_used=int(vm.total - vm.available),
        mem_total=int(vm.total),
        process_rss=int(_process.memory_info().rss),
        engine_rss=_rss(engine_pid),
    )


def _rss(pid: int | None) -> int | None:
    if pid is None or pid == os.getpid():
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


@dataclass
class Snapshot:
    t: float  # time.monotonic()
    wall: float  # time.time()
    host: HostSnapshot
    gpus: list[GpuSnapshot]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["host"]["cpu_mean"] = self.host.cpu_mean
        return d


def snapshot(engine_pid: int | None = None) -> Snapshot:
    gpus = [query_gpu(i) for i in range(gpu_count())] if nvml_status() == "" else []
    return Snapshot(time.monotonic(), time.time(), query_host(engine_pid), gpus)


# -- the sampler ----------------------------------------------------------------------
class Sampler:
    """Takes a snapshot every `interval` seconds into a bounded history, in a daemon thread."""

    def __init__(
        self, interval: float = 0.5, history: int = 600, on_snapshot: Callable[[Snapshot], None] | None = None
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0 seconds; got {interval}")
        self.interval = interval
        self.history: deque[Snapshot] = deque(maxlen=history)
        self.on_snapshot = on_snapshot
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # The engine process whose memory the host row reports beside the front end's.
        self.engine_pid: Callable[[], int | None] = lambda: None

    def start(self) -> Sampler:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            psutil.cpu_percent(percpu=True)  # prime: psutil's first reading is 0.0
            self._thread = threading.Thread(target=self._loop, name="gpuplay-telemetry", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            snap = self.take()
            if self.on_snapshot is not None:
                try:
                    self.on_snapshot(snap)
                except Exception:
                    pass  # a consumer's error must not end sampling
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def take(self) -> Snapshot:
        snap = snapshot(self.engine_pid())
        with self._lock:
            self.history.append(snap)
        return snap

    def window(self, t0: float, t1: float) -> list[Snapshot]:
        with self._lock:
            return [s for s in self.history if t0 <= s.t <= t1]

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- tying telemetry to a run's timed phase -----------------------------------------
class RunTelemetry:
    """Brackets a run's timed phase: mean utilisation and power, peak memory, energy,
    and what else used the machine meanwhile (`noise`: see core/noise.py).

    Works with or without a background Sampler: it also takes its own snapshot
    at both ends, so a timed phase shorter than the sampling interval still
    gets figures.
    """

    def __init__(self, sampler: Sampler | None = None) -> None:
        self.sampler = sampler

    def begin(self, device: str) -> Any:
        index = int(device.split(":")[1]) if device.startswith("cuda:") else (0 if device == "cuda" else None)
        gpu = query_gpu(index) if index is not None and nvml_status() == "" else None
        gmark = noise.gpu_mark(nvml, index) if gpu is not None and index is not None else None
        hmark = noise.host_mark()  # last: the window starts as close to the timed loop as it can
        return (time.monotonic(), psutil.cpu_times(), index, gpu, hmark, gmark)

    def end(self, token: Any) -> dict[str, Any]:
        t0, cpu0, index, gpu0, hmark0, gmark0 = token
        hmark1 = noise.host_mark()  # first, for the same reason
        t1 = time.monotonic()
        cpu1 = psutil.cpu_times()
        busy = lambda c: c.user + c.system + getattr(c, "nice", 0.0) + getattr(c, "irq", 0.0)  # noqa: E731
        total = lambda c: sum(c)  # noqa: E731
        dt_total = total(cpu1) - total(cpu0)
        out: dict[str, Any] = {
            "duration_s": t1 - t0,
            "host_cpu_mean_percent": 100.0 * (busy(cpu1) - busy(cpu0)) / dt_total if dt_total > 0 else None,
            "process_rss_bytes": _process.memory_info().rss,
            "noise": {"host": noise.host_noise(hmark0, hmark1), "gpu": None},
        }
        if index is None or gpu0 is None:
            out["gpu"] = None
            out["gpu_note"] = nvml_status() or "run on the CPU"
            return out
        gpu1 = query_gpu(index)
        snaps = [
            gpu0,
            *(
                g
                for s in (self.sampler.window(t0, t1) if self.sampler else [])
                for g in s.gpus
                if g.index == index
            ),
            gpu1,
        ]
        utils = [g.util_gpu for g in snaps if g.util_gpu is not None]
        powers = [g.power_w for g in snaps if g.power_w is not None]
        mems = [g.mem_used for g in snaps if g.mem_used is not None]
        gpu: dict[str, Any] = {
            "index": index,
            "name": gpu1.name,
            "util_mean_percent": sum(utils) / len(utils) if utils else None,
            "power_mean_w": sum(powers) / len(powers) if powers else None,
            "mem_peak_bytes": max(mems) if mems else None,
            "samples": len(snaps),
        }
        if gpu0.energy_mj is not None and gpu1.energy_mj is not None:
            gpu["energy_j"] = (gpu1.energy_mj - gpu0.energy_mj) / 1000.0
            gpu["energy_source"] = "NVML total-energy counter"
        elif gpu["power_mean_w"] is not None:
            gpu["energy_j"] = gpu["power_mean_w"] * (t1 - t0)
            gpu["energy_source"] = "mean power × time (no energy counter on this GPU)"
        out["gpu"] = gpu
        if gmark0 is not None:
            out["noise"]["gpu"] = noise.gpu_noise(nvml, index, gmark0, noise.gpu_mark(nvml, index), snaps)
        return out


# -- a paced stream (`gpuplay monitor`) ---------------------------------------------
def paced_snapshots(
    interval: float,
    count: int | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Snapshot]:
    """A snapshot every `interval` seconds, `count` of them (None: until the caller stops).

    The time spent taking a snapshot and handling it (the caller's work between two
    iterations) comes out of the wait, so the stream keeps its rate instead of drifting.
    """
    psutil.cpu_percent(percpu=True)  # psutil's first reading covers no interval: prime it
    sleep(min(interval, 0.1))
    n = 0
    while count is None or n < count:
        t0 = clock()
        yield snapshot()
        n += 1
        if count is None or n < count:
            sleep(max(0.0, interval - (clock() - t0)))
