"""GPU telemetry through NVML and host telemetry through psutil, sampled in a thread.

psutil is imported at its first use (the app's host row, a pid's memory): a run's window reads
the machine's CPU times and its own memory from /proc on Linux, as psutil reads them (core/noise).

Every NVML query answers None ("n/a") when it fails, never an exception: one
unsupported field (power on some boards, PCIe counters in a VM) must not take
the panel down. NVML is initialised on first use; when it cannot be (no library,
no driver) `nvml_status()` gives that one clear line.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplay.core.hw import nvidia as gpm
from gpuplay.core.measure import noise

# The other vendors' glue (core/hw/devices, amd, intel, apple) is imported where a device of
# theirs asks for it: a NumPy run's engine never needs it.
ACCELERATOR_PREFIXES = ("cuda", "xpu", "mps")

# Host figures only: without psutil the GPU's still come (and, on Linux, a run's window's host
# figures, from /proc). Imported at first use (`_psutil`); a test may put a fake here, which is then
# read instead of /proc (noise.reads_proc).
psutil: Any = noise.NotImported()


def _psutil() -> Any:
    """psutil, imported now if it was not yet; None where it is not installed."""
    global psutil
    if isinstance(psutil, noise.NotImported):
        try:
            import psutil as module
        except ImportError:  # exercised in a subprocess by the tests
            module = None
        psutil = module
    return psutil


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
                missing = _nvml_library_missing()
                if missing is not None:
                    self._error = missing
                    return self._error
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


NVML_LIBRARY = "libnvidia-ml.so.1"  # the name nvidia-ml-py's _LoadNvmlLibrary opens on Linux
LIBRARY_NOT_FOUND = "the NVIDIA driver library (libnvidia-ml.so) was not found: no NVIDIA driver installed"


def _nvml_library_missing() -> str | None:
    """Why NVML cannot load, found without importing nvidia-ml-py (9–30 ms on the development
    machine, which has no NVIDIA driver): the module not installed, or on Linux the driver's
    library not loadable under the name nvidia-ml-py opens. None: go on and import it. A module
    already imported (a test's stand-in, an earlier import) is used as it is."""
    import importlib.util

    if "pynvml" in sys.modules:
        return None
    if importlib.util.find_spec("pynvml") is None:
        return "NVML unavailable: nvidia-ml-py is not installed"
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(NVML_LIBRARY)
        except OSError:
            # The words nvidia-ml-py's own NVMLError_LibraryNotFound gives (_nvml_error_text).
            return f"NVML unavailable: {LIBRARY_NOT_FOUND} (NVMLError_LibraryNotFound)"
    return None


def _nvml_error_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    hints = {
        "LibraryNotFound": LIBRARY_NOT_FOUND,
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
    throttle_reasons: int | None = None  # NVML clock-event reason bits (see core/measure/noise.py)
    vendor: str = "NVIDIA"  # or "AMD" (amdsmi); `index` is then amdsmi's order
    # GPM figures since the previous snapshot (core/hw/nvidia.py), or {"reason": why not}; None
    # when no view asked for them (GPM is sampled only while one does).
    activity: dict[str, Any] | None = None


# -- CUDA device → NVML device -----------------------------------------------------------
# NVML numbers GPUs by PCI bus id; CUDA by speed (CUDA_DEVICE_ORDER=FASTEST_FIRST, the default)
# and through CUDA_VISIBLE_DEVICES' reordering. Only the UUID names the same GPU on both sides
# (as nvitop matches them). A MIG instance has a UUID of its own; its figures are its parent's.


@dataclass(frozen=True)
class NvmlTarget:
    """The NVML device behind one CUDA device."""

    cuda_index: int
    nvml_index: int  # of the physical GPU (a MIG instance's parent)
    uuid: str  # NVML's spelling: GPU-… or MIG-…
    handle: Any  # the physical GPU's NVML handle
    mig: bool = False  # the CUDA device is a MIG instance of that GPU
    mig_handle: Any = None


def _uuid_key(text: Any) -> str:
    """A UUID in any spelling (GPU-…, MIG-…, bytes, with or without dashes) as 32 hex digits."""
    if isinstance(text, bytes | bytearray):
        raw = bytes(text)
        text = raw.decode(errors="replace") if raw[:4] in (b"GPU-", b"MIG-") else raw.hex()
    t = str(text).strip().lower()
    for prefix in ("gpu-", "mig-"):
        t = t.removeprefix(prefix)
    return t.replace("-", "")


def cuda_device_uuids() -> list[str] | None:
    """The UUID of every CUDA device, in CUDA's order; None when nothing here can tell.

    From torch or CuPy where this process has loaded them (never imported here: the UI
    process must not load torch), else from the environment as nvitop reads it:
    CUDA_VISIBLE_DEVICES entries that are UUIDs, or indices under CUDA_DEVICE_ORDER=PCI_BUS_ID
    (NVML's own order). Under the default FASTEST_FIRST order an index says nothing.
    """
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return [
                _uuid_key(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())
            ]
    except Exception:
        pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            n = cupy.cuda.runtime.getDeviceCount()
            return [_uuid_key(cupy.cuda.runtime.getDeviceProperties(i)["uuid"]) for i in range(n)]
        except Exception:
            pass
    return _uuids_from_environment()


def _uuids_from_environment() -> list[str] | None:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [v.strip() for v in visible.split(",")] if visible is not None else None
    if entries and all(e.upper().startswith(("GPU-", "MIG-")) for e in entries):
        return [_uuid_key(e) for e in entries]
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" or nvml.ensure() is not None:
        return None
    count = nvml.call("nvmlDeviceGetCount") or 0
    if entries is None:
        indices = list(range(count))
    elif all(e.isdigit() for e in entries):
        indices = [int(e) for e in entries]
    else:
        return None
    uuids = []
    for i in indices:
        h = nvml.call("nvmlDeviceGetHandleByIndex", i) if i < count else None
        u = _nvml_uuid(h) if h is not None else None
        if u is None:
            return None
        uuids.append(_uuid_key(u))
    return uuids


def _nvml_uuid(handle: Any) -> str | None:
    u = nvml.call("nvmlDeviceGetUUID", handle)
    return u.decode() if isinstance(u, bytes) else u


def _mig_children(handle: Any) -> Iterator[Any]:
    mode = nvml.call("nvmlDeviceGetMigMode", handle)
    if not mode or not mode[0]:  # (current, pending); 1 = enabled
        return
    for j in range(nvml.call("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        child = nvml.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, j)
        if child is not None:
            yield child


def nvml_handle_for_cuda_device(device: str | int) -> NvmlTarget | None:
    """The NVML device of `device` ('cuda', 'cuda:N' or N), matched by UUID; None when it cannot be.

    None: NVML is unusable, or no library in this process can tell the CUDA device's UUID,
    or no NVML device has it. Never a guess by index.
    """
    if isinstance(device, str):
        if not device.startswith("cuda"):
            return None
        device = int(device.split(":")[1]) if ":" in device else 0
    if nvml.ensure() is not None:
        return None
    uuids = cuda_device_uuids()
    if not uuids or not 0 <= device < len(uuids):
        return None
    want = uuids[device]
    for i in range(nvml.call("nvmlDeviceGetCount") or 0):
        h = nvml.call("nvmlDeviceGetHandleByIndex", i)
        if h is None:
            continue
        u = _nvml_uuid(h)
        if u is not None and _uuid_key(u) == want:
            return NvmlTarget(device, i, u, h)
        for child in _mig_children(h):
            cu = _nvml_uuid(child)
            if cu is not None and _uuid_key(cu) == want:
                return NvmlTarget(device, i, cu, h, mig=True, mig_handle=child)
    return None


def cuda_nvml_mapping() -> list[dict[str, Any]]:
    """One row per CUDA device: its UUID and the NVML index of its GPU (None where unmatched)."""
    uuids = cuda_device_uuids() or []
    rows = []
    for i, u in enumerate(uuids):
        t = nvml_handle_for_cuda_device(i)
        rows.append(
            {
                "cuda": f"cuda:{i}",
                "uuid": t.uuid if t is not None else u,
                "nvml_index": t.nvml_index if t is not None else None,
                "mig": t.mig if t is not None else None,
                "matched_by": "uuid" if t is not None else None,
                "note": "" if t is not None else (nvml_status() or "no NVML device has this UUID"),
            }
        )
    return rows


def query_gpu(index: int, *, fast: bool = False) -> GpuSnapshot:
    """NVML's figures of GPU `index` (NVML's numbering). `fast`: only the queries that answer
    at once: no PCIe throughput (NVML samples it over ~20 ms per direction) and no process list,
    which is what a query inside a run's timed window may take."""
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
    if not fast:
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
    if fast:
        return snap
    procs = nvml.call("nvmlDeviceGetComputeRunningProcesses", h)
    own, _others, unknown = noise.split_processes(procs or [], os.getpid())
    if unknown:  # PIDs of another namespace (a container): which one is ours cannot be told
        snap.process_mem = None
    else:
        used = [m for m in own.values() if m is not None]
        snap.process_mem = (
            sum(used) if used else (0 if procs is not None and snap.mem_used is not None else None)
        )
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


_process: Any = None  # psutil.Process() of this process, made at first use


def _own_process() -> Any:
    """This process's psutil.Process; None without psutil."""
    global _process
    if _psutil() is None:
        return None
    if _process is None or _process.pid != os.getpid():  # a forked child is another process
        _process = psutil.Process()
    return _process


def query_host(engine_pid: int | None = None) -> HostSnapshot:
    me = _own_process()
    if me is None:
        return HostSnapshot()  # no psutil: no host figures
    vm = psutil.virtual_memory()
    return HostSnapshot(
        cpu_percent=psutil.cpu_percent(percpu=True),
        mem_used=int(vm.total - vm.available),
        mem_total=int(vm.total),
        process_rss=int(me.memory_info().rss),
        engine_rss=_rss(engine_pid),
    )


def _rss(pid: int | None) -> int | None:
    if _psutil() is None or pid is None or pid == os.getpid():
        return None
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


_page_size: int | None = None


def _own_rss() -> int | None:
    """This process's resident memory, psutil.Process().memory_info().rss: on Linux read as
    _pslinux.Process.memory_info reads it (/proc/self/statm's second field × the page size)."""
    global _page_size
    if noise.reads_proc(psutil):
        try:
            with open("/proc/self/statm", "rb") as f:
                pages = int(f.readline().split()[1])
            if _page_size is None:
                _page_size = os.sysconf("SC_PAGE_SIZE")
            return pages * _page_size
        except (OSError, ValueError, IndexError):
            pass  # psutil's answer
    me = _own_process()
    return int(me.memory_info().rss) if me is not None else None


def _cpu_times() -> Any:
    """psutil.cpu_times() now: from /proc/stat on Linux (noise.proc_cpu_times), else psutil's; None
    without either."""
    if noise.reads_proc(psutil):
        try:
            return noise.proc_cpu_times()
        except OSError:
            pass  # psutil answers from now on
    return ps.cpu_times() if (ps := _psutil()) is not None else None


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


def snapshot(engine_pid: int | None = None, activity: gpm.GpmStream | None = None) -> Snapshot:
    """Host and every GPU now; `activity`: also each GPU's GPM figures since the last snapshot."""
    gpus = [query_gpu(i) for i in range(gpu_count())] if nvml_status() == "" else []
    if activity is not None:
        for g in gpus:
            handle = nvml.call("nvmlDeviceGetHandleByIndex", g.index)
            g.activity = activity.read(g.index, handle, g.name).to_dict()
    gpus.extend(amd_gpus())
    return Snapshot(time.monotonic(), time.time(), query_host(engine_pid), gpus)


def amd_gpus() -> list[GpuSnapshot]:
    """amdsmi's GPUs as snapshots (vendor "AMD"); none where amdsmi is not installed or fails."""
    from gpuplay.core.hw import amd

    if not amd.installed() or amd.status():
        return []
    return [GpuSnapshot(g.index, vendor="AMD", **amd.query(g)) for g in amd.gpus()]


def gpm_status(index: int) -> str:
    """'' when GPU `index` (NVML's numbering) has GPM counters, else why not (`gpuplay info`)."""
    if nvml.ensure() is not None:
        return f"GPM n/a: {nvml.ensure()}"
    handle = nvml.call("nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        return "GPM n/a: NVML cannot open this GPU"
    name = nvml.call("nvmlDeviceGetName", handle)
    return gpm.unavailable(nvml, handle, name.decode() if isinstance(name, bytes) else name)


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
        self._gpm: gpm.GpmStream | None = None  # GPM counters, sampled while a view shows them

    @property
    def activity(self) -> bool:
        return self._gpm is not None

    @activity.setter
    def activity(self, wanted: bool) -> None:
        """Sample GPM (a view showing it is on screen) or stop and free its samples."""
        with self._lock:
            if wanted and self._gpm is None:
                self._gpm = gpm.GpmStream(nvml)
            elif not wanted and self._gpm is not None:
                self._gpm.close()
                self._gpm = None

    def start(self) -> Sampler:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            if _psutil() is not None:
                psutil.cpu_percent(percpu=True)  # prime: psutil's first reading is 0.0
            self._thread = threading.Thread(target=self._loop, name="gpuplay-telemetry", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.activity = False  # free GPM's open window: nothing samples any more

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
        snap = snapshot(self.engine_pid(), self._gpm)
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
WINDOW_INTERVAL_S = 0.1  # GPU samples during a timed phase
NVML_AVERAGING_S = 1.0  # NVML's power (and at most its utilisation) averaging window


class _WindowSampler:
    """Fast NVML queries of one GPU every `interval` s in a daemon thread, for one timed phase.

    NVML's calls release the GIL; the queries that take time (PCIe throughput, process
    lists) are left out, so sampling neither idles the GPU nor stalls the timed loop.
    """

    def __init__(self, nvml_index: int, interval: float = WINDOW_INTERVAL_S) -> None:
        self.index, self.interval = nvml_index, interval
        self.samples: list[GpuSnapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuplay-run-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(query_gpu(self.index, fast=True))

    def stop(self) -> list[GpuSnapshot]:
        self._stop.set()
        self._thread.join(max(1.0, 5 * self.interval))
        return list(self.samples)


@dataclass
class _Window:
    t0: float
    cpu0: Any
    target: NvmlTarget | None
    gpu0: GpuSnapshot | None
    hmark: Any
    gmark: Any
    sampler: _WindowSampler | None
    gpu_note: str = ""
    activity: gpm.GpmWindow | None = None
    vendor: Any = None  # AMD, Intel or Apple's own reader (core/hw): NVML's fields stay unused
    own_pids: frozenset[int] = frozenset()  # a data loader's workers: the run's own CPU


class RunTelemetry:
    """Brackets a run's timed phase: mean utilisation and power, peak memory, energy,
    and what else used the machine meanwhile (`noise`: see core/measure/noise.py).

    The GPU's means come from samples taken during the phase: the app's Sampler where one is
    given, else a sampling thread of its own (every 0.1 s), plus a snapshot at both ends so
    that a phase shorter than the interval still gets figures. The run's CUDA device is found
    in NVML by UUID (nvml_handle_for_cuda_device), never by index.
    """

    def __init__(self, sampler: Sampler | None = None, interval: float = WINDOW_INTERVAL_S) -> None:
        self.sampler = sampler
        self.interval = interval

    def begin(self, device: str, own_pids: Collection[int] = ()) -> Any:
        """Start the window; `own_pids` (a data loader's workers) count as the run's own CPU."""
        vendor = None  # the CPU's: NVML's or nobody's
        if device.startswith(ACCELERATOR_PREFIXES):
            from gpuplay.core.hw.devices import run_window

            vendor = run_window(device)  # not NVIDIA's: amdsmi (ROCm), torch.xpu or torch.mps answer
        if vendor is not None:
            cpu0 = _cpu_times()
            hmark = noise.host_mark(listing=bool(own_pids))
            vw = _Window(time.monotonic(), cpu0, None, None, hmark, None, None, vendor.note, None, vendor)
            vw.own_pids = frozenset(own_pids)
            return vw
        target, gpu0, gmark, note = None, None, None, ""
        if device.startswith("cuda"):
            note = nvml_status()
            if not note:
                target = nvml_handle_for_cuda_device(device)
                if target is None:
                    note = f"cannot tell which NVML device {device} is (no UUID match): no GPU telemetry"
        if target is not None:
            gpu0 = query_gpu(target.nvml_index, fast=True)
            gmark = noise.gpu_mark(nvml, target.nvml_index)
        own = self.sampler is None or not self.sampler.running
        window = _WindowSampler(target.nvml_index, self.interval) if target is not None and own else None
        cpu0 = _cpu_times()
        activity = _gpm_window(target, gpu0)  # one GPM sample here, one at the end: none between
        # Last: the window starts as close to the timed loop as it can. A run with helper processes
        # (a loader's workers) lists every process, or their CPU would read as another's.
        hmark = noise.host_mark(listing=bool(own_pids))
        w = _Window(time.monotonic(), cpu0, target, gpu0, hmark, gmark, window, note, activity)
        w.own_pids = frozenset(own_pids)
        return w

    def end(self, token: Any) -> dict[str, Any]:
        w: _Window = token
        hmark1 = noise.host_mark(w.hmark)  # first, for the same reason
        t1 = time.monotonic()
        activity = w.activity.close() if w.activity is not None else None
        during = w.sampler.stop() if w.sampler is not None else []
        out: dict[str, Any] = {
            "duration_s": t1 - w.t0,
            "host_cpu_mean_percent": _cpu_busy_percent(w.cpu0),
            "process_rss_bytes": _own_rss(),
            "noise": {"host": noise.host_noise(w.hmark, hmark1, w.own_pids), "gpu": None},
        }
        if w.vendor is not None:
            out["gpu"] = w.vendor.end(t1 - w.t0)
            if out["gpu"] is None:
                out["gpu_note"] = w.vendor.note or "no telemetry for this device"
            return out
        target = w.target
        if target is None or w.gpu0 is None:
            out["gpu"] = None
            out["gpu_note"] = w.gpu_note or nvml_status() or "run on the CPU"
            return out
        index = target.nvml_index
        gpu1 = query_gpu(index, fast=True)
        if self.sampler is not None and w.sampler is None:
            during = [g for s in self.sampler.window(w.t0, t1) for g in s.gpus if g.index == index]
        snaps = [w.gpu0, *during, gpu1]
        utils = [g.util_gpu for g in snaps if g.util_gpu is not None]
        powers = [g.power_w for g in snaps if g.power_w is not None]
        mems = [g.mem_used for g in snaps if g.mem_used is not None]
        gpu: dict[str, Any] = {
            "index": index,
            "cuda_index": target.cuda_index,
            "uuid": target.uuid,
            "name": gpu1.name,
            "util_mean_percent": sum(utils) / len(utils) if utils else None,
            "power_mean_w": sum(powers) / len(powers) if powers else None,
            "mem_peak_bytes": max(mems) if mems else None,
            "samples": len(snaps),
            "samples_during": len(during),
        }
        if activity is not None:  # GPM's averages over the timed window, or why there are none
            gpu["activity"] = activity.to_dict()
        _window_energy(gpu, w.gpu0, gpu1, t1 - w.t0)
        if target.mig:
            # NVML has no per-instance utilisation or power: what it reports is the whole GPU's,
            # other instances' work included. Utilisation is n/a; the rest is labelled.
            gpu["util_mean_percent"] = None
            gpu["mig"] = True
            gpu["mig_note"] = (
                f"{target.uuid} is a MIG instance: utilisation n/a under MIG; power, memory and energy "
                "are the whole GPU's (its other instances included)"
            )
        if t1 - w.t0 < NVML_AVERAGING_S:
            _short_window(gpu, t1 - w.t0)
        out["gpu"] = gpu
        if w.gmark is not None:
            out["noise"]["gpu"] = noise.gpu_noise(nvml, index, w.gmark, noise.gpu_mark(nvml, index), snaps)
        return out


def _window_energy(gpu: dict[str, Any], gpu0: GpuSnapshot, gpu1: GpuSnapshot, seconds: float) -> None:
    """The window's energy: NVML's counter where the GPU has one, else mean power × time."""
    if gpu0.energy_mj is not None and gpu1.energy_mj is not None:
        gpu["energy_j"] = (gpu1.energy_mj - gpu0.energy_mj) / 1000.0
        gpu["energy_source"] = "NVML total-energy counter"
    elif gpu["power_mean_w"] is not None:
        gpu["energy_j"] = gpu["power_mean_w"] * seconds
        gpu["energy_source"] = "mean power × time (no energy counter on this GPU)"


def _gpm_window(target: NvmlTarget | None, gpu0: GpuSnapshot | None) -> gpm.GpmWindow | None:
    if target is None:
        return None
    mig = target.mig_handle if target.mig else None
    return gpm.GpmWindow(gpm.GpmSampler(nvml, target.handle, gpu0.name if gpu0 else None, mig))


def _short_window(gpu: dict[str, Any], seconds: float) -> None:
    """A run shorter than NVML's averaging: its power and utilisation are not the run's own.

    NVML's power reading is a 1-second average on Ampere (except GA100) and later, Hopper
    included, and utilisation is the busy fraction over a sample period of 1/6 s to 1 s: over a
    shorter run both mostly describe the time before it. They are kept apart, named for what
    they are, and the run's own means are n/a.
    """
    gpu["power_nvml_w"], gpu["util_nvml_percent"] = gpu["power_mean_w"], gpu["util_mean_percent"]
    gpu["power_mean_w"] = gpu["util_mean_percent"] = None
    if str(gpu.get("energy_source", "")).startswith("mean power"):  # power × time: not this run's either
        gpu.pop("energy_j", None)
        gpu["energy_source"] = "n/a: no energy counter, and NVML's power is a 1-second average"
    gpu["averaging_note"] = (
        f"power and utilisation n/a for this {seconds:.2f} s window: NVML reports them as 1-second "
        "averages (Hopper and later), most of which lie before the run"
    )


def _cpu_busy_percent(cpu0: Any) -> float | None:
    cpu1 = _cpu_times() if cpu0 is not None else None
    if cpu1 is None:
        return None

    def busy(c: Any) -> float:
        return float(c.user + c.system + getattr(c, "nice", 0.0) + getattr(c, "irq", 0.0))

    dt_total = sum(cpu1) - sum(cpu0)
    return 100.0 * (busy(cpu1) - busy(cpu0)) / dt_total if dt_total > 0 else None


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
    if _psutil() is not None:
        psutil.cpu_percent(percpu=True)  # psutil's first reading covers no interval: prime it
    stream = gpm.GpmStream(nvml) if nvml_status() == "" else None
    if stream is not None:
        snapshot(activity=stream)  # GPM's first sample opens the first window
    sleep(min(interval, 0.1))
    n = 0
    try:
        while count is None or n < count:
            t0 = clock()
            yield snapshot(activity=stream)
            n += 1
            if count is None or n < count:
                sleep(max(0.0, interval - (clock() - t0)))
    finally:
        if stream is not None:
            stream.close()
