"""What else used the machine during a run's timed window, and the warnings it earns.

Measured, not guessed:
- host: the whole machine's busy CPU time (psutil.cpu_times' figures; on Linux read from /proc/stat
  as psutil reads it, without importing psutil) minus this process's, over the window, in cores;
  attributed to processes by their own CPU-time deltas (the top ones named).
  A process that started and ended inside the window counts in the total but cannot be named.
  Listing every process costs 0.5-10 ms at each end of a window (a sweep pays it per point), so it
  is listed only when the machine was not just seen quiet; a window that finds it busy anyway
  reports the total unnamed, and the next window lists again. A window that starts within
  REUSE_LISTING_S of the last listed window's end takes that end's listing as its start's (a
  sweep's next point): the named processes' figures then cover that slightly longer span, and are
  divided by it.
- the hypervisor's steal time, where the kernel reports it (a VM's noisy neighbour).
- GPU (NVML): other processes holding the run's GPU (compute and graphics), their SM share where
  the driver samples it, clocks, and the time the GPU spent power- or thermally-limited: NVML's
  violation counters (exact time) when the board has them, else the throttle-reason bits sampled.

Thresholds follow pyperf's `check` spirit: a spread over 10 % of the median makes a run unstable.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class NotImported:
    """A module's `psutil` until a function there first needs it (`_psutil`)."""


# psutil is imported at the first look at the machine that needs it, not with this module: a front
# end reads only the verdicts below (`stability`, the advice), and paid ~10 ms of a NumPy run's path
# to its request for the import on the 2-core machine. On Linux a run's window needs no
# psutil at all (`reads_proc`): ~7-14 ms of the engine's start. Tests put a fake
# here: a fake is read instead of /proc.
psutil: Any = NotImported()


def _psutil() -> Any:
    """psutil, imported now if it was not yet; None without it (host noise is then not
    measured where /proc cannot stand in for it; the GPU's still is)."""
    global psutil
    if isinstance(psutil, NotImported):
        try:
            import psutil as module
        except ImportError:  # exercised in a subprocess by the tests
            module = None
        psutil = module
    return psutil


# -- the machine's figures as psutil reads them on Linux, without psutil ----------------------
# Whether /proc/stat has answered as psutil's Linux functions expect; False after it once did not
# (then psutil answers, as elsewhere: macOS, Windows).
_proc_host = sys.platform.startswith("linux")


def reads_proc(ps: Any) -> bool:
    """Whether the /proc readers below stand in for `ps`, a module's `psutil` seam: yes on Linux
    while /proc/stat reads, unless `ps` is a test's fake (anything but psutil not yet imported,
    the imported module itself, or None where it is not installed: what is in sys.modules)."""
    return _proc_host and (isinstance(ps, NotImported) or ps is sys.modules.get("psutil"))


# psutil's names for /proc/stat's cpu fields, in its order (a kernel before 2.6.11 has the first 7)
CPU_TIMES_FIELDS = (
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
)
_cputimes_type: Any = None
_clock_ticks: int | None = None


def _proc_stat_failed() -> None:
    global _proc_host
    _proc_host = False


def proc_cpu_times() -> Any:
    """psutil.cpu_times() as psutil 7 reads it on Linux (_pslinux.cpu_times and the fields of
    _pslinux._scputimes_ntuple): the first line of /proc/stat, `cpu` then user, nice, system, idle,
    iowait, irq, softirq[, steal[, guest[, guest_nice]]] in clock ticks, each / SC_CLK_TCK. A
    namedtuple of those names. OSError (and /proc no longer used) when /proc/stat cannot be read."""
    global _cputimes_type, _clock_ticks
    try:
        with open("/proc/stat", "rb") as f:
            values = f.readline().split()
        if _clock_ticks is None:
            _clock_ticks = os.sysconf("SC_CLK_TCK")
        if values[:1] != [b"cpu"] or len(values) < 8:
            raise ValueError("no cpu line of psutil's fields")
        if _cputimes_type is None:
            from collections import namedtuple

            names = CPU_TIMES_FIELDS[: min(len(values) - 1, len(CPU_TIMES_FIELDS))]
            _cputimes_type = namedtuple("scputimes", names)  # type: ignore[misc]
        ticks = values[1 : len(_cputimes_type._fields) + 1]
        return _cputimes_type(*(float(x) / _clock_ticks for x in ticks))
    except (OSError, ValueError, TypeError) as e:
        _proc_stat_failed()
        raise OSError(f"/proc/stat: {e}") from e


def proc_boot_time() -> float:
    """psutil.boot_time() as _pslinux.boot_time reads it: /proc/stat's `btime` line, as a float."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime"):
                    return float(line.strip().split()[1])
    except (OSError, ValueError, IndexError) as e:
        _proc_stat_failed()
        raise OSError(f"/proc/stat: {e}") from e
    raise OSError("/proc/stat has no btime line")  # its cpu line may still read: /proc stays on


def proc_cpu_count() -> int | None:
    """psutil.cpu_count() as psutil 7 gives it on Linux (cpu_count and _pslinux.cpu_count_logical):
    sysconf(SC_NPROCESSORS_ONLN), None below 1. (psutil's fallbacks, for a sysconf without the
    name, are psutil's: it is asked then.)"""
    try:
        n = os.sysconf("SC_NPROCESSORS_ONLN")
    except (ValueError, OSError):
        ps = _psutil()
        return ps.cpu_count() if ps is not None else os.cpu_count()
    return n if n >= 1 else None


def own_cpu_seconds() -> float:
    """This process's user + system CPU seconds, psutil.Process().cpu_times()'s user + system:
    times(2) counts the same thread-group ticks as /proc/self/stat's utime and stime (both the
    kernel's thread_group_cputime_adjusted, in clock ticks)."""
    t = os.times()
    return t.user + t.system


def _cpu_count() -> int | None:
    if reads_proc(psutil):
        return proc_cpu_count()
    return ps.cpu_count() if (ps := _psutil()) is not None else None


def _boot_time() -> float | None:
    """psutil.boot_time(); None where neither /proc/stat nor psutil can say."""
    if reads_proc(psutil):
        try:
            return proc_boot_time()
        except OSError:
            pass
    ps = _psutil()
    try:
        return float(ps.boot_time()) if ps is not None and hasattr(ps, "boot_time") else None
    except Exception:  # psutil's RuntimeError for a /proc/stat without btime: nobody is named
        return None


UNSTABLE_REL_IQR = 0.10  # IQR / median above this: the median is not one figure
OTHER_CPU_MIN_CORES = 0.25  # background below this is a quiet machine
OTHER_CPU_CORE_FRACTION = 0.05  # ... or this share of the cores, on big machines
OTHER_CPU_MIN_SECONDS = 0.05  # CPU time is counted in 10 ms ticks: below 5 ticks it is rounding
STEAL_MIN_CORES = 0.1
THROTTLE_MIN_FRACTION = 0.02
TOP = 3  # named in a warning
KEEP = 8  # kept in the result

# NVML clock event ("throttle") reasons, as bits: those that mean "slowed down".
THROTTLE_BITS = {
    0x4: "power",  # software power cap
    0x8: "hardware slowdown",
    0x20: "thermal",  # software thermal slowdown
    0x40: "thermal",  # hardware thermal slowdown
    0x80: "power brake",
}
VIOLATION_POLICIES = {"power": 0, "thermal": 1}  # NVML_PERF_POLICY_POWER, _THERMAL


# -- host ------------------------------------------------------------------------------
ProcKey = tuple[int, float]  # (pid, create time): a reused pid is another process


def process_cpu_seconds(exclude: int) -> dict[ProcKey, float]:
    """Every process's user+system CPU seconds so far (those we may read), but `exclude`.

    Names are read later, for the few worth naming: this runs at both ends of every run.
    """
    if _PROC_STAT and (reads_proc(psutil) or hasattr(_psutil(), "boot_time")):
        return _proc_cpu_seconds(exclude)
    out: dict[ProcKey, float] = {}
    for p in psutil.process_iter(["cpu_times", "create_time"]):
        ct, created = p.info.get("cpu_times"), p.info.get("create_time")
        if p.pid == exclude or ct is None or created is None:
            continue
        out[(p.pid, created)] = ct.user + ct.system
    return out


_PROC_STAT = os.path.isfile("/proc/self/stat")
_boot: float | None = None
# At most this many /proc/PID/stat files are kept open between looks, and at most an eighth of the
# process's descriptor limit (the rest are opened at each look, as before): the measured code's
# own files must never run short of descriptors.
MAX_KEPT_OPEN = 256


class _StatFiles:
    """Each process's /proc/PID/stat kept open between looks: a look is one pread of each (the
    kernel writes the figures afresh at every read), plus an open for each process new since the
    last, instead of an open, a read and a close of every one: ~4× less at both ends of every
    window on a busy machine. A descriptor whose process has ended fails its read (ESRCH) and is
    closed; its pid, if reused, is opened anew, so a descriptor never reads another process."""

    def __init__(self) -> None:
        self.pid = os.getpid()  # a forked child starts its own (it shares these descriptors)
        self.open: dict[int, int] = {}
        self.comm: dict[int, bytes] = {}  # each listed process's name, as its stat line said last
        self.keep = min(MAX_KEPT_OPEN, _descriptor_limit() // 8)

    def read(self, pid: int) -> bytes | None:
        """The stat line of `pid`, or None when it is gone or not ours to read."""
        fd = self.open.get(pid)
        if fd is not None:
            try:
                data = os.pread(fd, 4096, 0)
                if data:
                    return data
            except OSError:
                pass
            del self.open[pid]
            os.close(fd)
        try:
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.pread(fd, 4096, 0)
        except OSError:
            data = b""
        if data and len(self.open) < self.keep:
            self.open[pid] = fd
        else:
            os.close(fd)
        return data or None

    def forget_all_but(self, pids: Collection[int]) -> None:
        """Close the files of processes no longer listed in /proc."""
        for pid in [p for p in self.open if p not in pids]:
            os.close(self.open.pop(pid))
        for pid in [p for p in self.comm if p not in pids]:
            del self.comm[pid]


def _descriptor_limit() -> int:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1024
    return soft if soft != resource.RLIM_INFINITY and soft > 0 else 1 << 20


_stat_files: _StatFiles | None = None
_stat_lock = threading.Lock()  # threads look at once (devices measured side by side in one process)


def _new_stat_lock() -> None:
    global _stat_lock
    _stat_lock = threading.Lock()  # a forked child's: another thread may hold the parent's


os.register_at_fork(after_in_child=_new_stat_lock)


def _proc_cpu_seconds(exclude: int) -> dict[ProcKey, float]:
    """process_cpu_seconds read from /proc/PID/stat directly, as psutil reads it (utime + stime
    in clock ticks; the create time as boot time + start ticks, psutil's own formula, so the keys
    match), without a Process object per process, and from files kept open (`_StatFiles`)."""
    global _boot
    if _boot is None:
        _boot = _boot_time()
        if _boot is None:
            return {}  # no boot time: the keys cannot be psutil's, nobody is named
    with _stat_lock:
        return _read_stat_files(exclude, _boot)


def _read_stat_files(exclude: int, boot: float) -> dict[ProcKey, float]:
    global _stat_files
    if _stat_files is None or _stat_files.pid != os.getpid():
        _stat_files = _StatFiles()
    files = _stat_files
    hz = os.sysconf("SC_CLK_TCK")
    try:
        pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
    except OSError:  # no descriptor left (the measured code holds them all): nobody named, as unreadable
        return {}
    files.forget_all_but(pids)
    out: dict[ProcKey, float] = {}
    for pid in pids:
        if pid == exclude:
            continue
        data = files.read(pid)
        if data is None:
            continue  # gone since the listing, or not ours to read
        try:
            close = data.rindex(b")")  # the command name may hold spaces and parentheses
            fields = data[close + 2 :].split()
            out[(pid, boot + int(fields[19]) / hz)] = (int(fields[11]) + int(fields[12])) / hz
        except (ValueError, IndexError):
            continue
        files.comm[pid] = data[data.find(b"(") + 1 : close]
    return out


# The kernel's command name is cut at 15 bytes: psutil then reads the command line for the rest.
COMM_MAX = 15


def _name(pid: int) -> str:
    """The process's name as psutil names it; from the last listing's stat line where that is
    psutil's answer too (a name shorter than the kernel's cut), without reading /proc again: the
    few processes a busy window names cost ~0.1 ms each at every point of a sweep."""
    files = _stat_files
    comm = files.comm.get(pid) if files is not None and files.pid == os.getpid() else None
    if comm is not None and len(comm) < COMM_MAX:
        return os.fsdecode(comm)  # psutil's decoding (the file system's, surrogateescape)
    if comm is not None:
        return _completed_name(pid, os.fsdecode(comm))
    if _psutil() is None:
        return f"pid {pid}"
    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError):
        return f"pid {pid}"  # gone since, or not ours to read


def _completed_name(pid: int, comm: str) -> str:
    """A name the kernel cut at 15 bytes, completed from the command line as psutil's
    Process.name() does on Linux (psutil 7: the command line's first word's base name where it
    starts with the cut name), without importing psutil: a busy machine's long-named process
    made a NumPy run's engine import it (~10 ms)."""
    try:
        with open(
            f"/proc/{pid}/cmdline", encoding=sys.getfilesystemencoding(), errors="surrogateescape"
        ) as f:
            data = f.read()
    except OSError:
        return comm  # gone, or not ours to read: psutil's answer is the cut name too
    if not data:
        return comm  # a zombie
    sep = "\x00" if data.endswith("\x00") else " "  # psutil's cmdline(): setproctitle uses spaces
    if data.endswith(sep):
        data = data[:-1]
    words = data.split(sep)
    if sep == "\x00" and len(words) == 1 and " " in data:
        words = data.split(" ")
    extended = os.path.basename(words[0]) if words else ""
    return extended if extended.startswith(comm) else comm


def _busy(c: Any) -> float:
    return c.user + c.system + getattr(c, "nice", 0.0) + getattr(c, "irq", 0.0) + getattr(c, "softirq", 0.0)


@dataclass
class HostMark:
    t: float  # monotonic
    wall: float
    cpu: Any  # psutil.cpu_times() (or proc_cpu_times(): the same fields)
    own: float  # this process's CPU seconds
    procs: dict[ProcKey, float] | None  # None: not listed (the machine was just seen quiet)
    # When and where `procs` was read, where it was not read with this mark: the last window's
    # end's listing, taken over as this window's start's (REUSE_LISTING_S).
    listed_t: float | None = None
    listed_wall: float | None = None


# A look back shorter than this is a few 10 ms clock ticks: it cannot tell quiet from busy.
QUIET_LOOKBACK_S = 0.1
# The machine as last read here: (monotonic, busy CPU s, own CPU s), and whether the last window
# was quiet. Module state on purpose: the engine process measures one window after another.
_last: tuple[float, float, float] | None = None
_last_window_quiet = False
_me: Any = None
# A window's start takes the last window's end listing as its own when it was read at most this
# long before (in this process): what ran in between, two 10 ms clock ticks at most, is counted
# with the window's, over the span from that listing (`listed_s`). A sweep's points are ~10 ms
# apart; a listing costs ~0.5 ms quiet, 1-2 ms on a busy machine.
REUSE_LISTING_S = 0.02
# The last window end's listing: (monotonic once read, wall clock, pid, the listing).
_end_listing: tuple[float, float, int, dict[ProcKey, float]] | None = None


def _quiet(other_cores: float) -> bool:
    """Below what host_warnings calls out: no warning would name anyone."""
    cores = _cpu_count() or 1
    return other_cores < max(OTHER_CPU_MIN_CORES, OTHER_CPU_CORE_FRACTION * cores)


def _recently_quiet(t: float, busy: float, own: float) -> bool:
    if _last is None:
        return False  # nothing seen yet: list
    t0, busy0, own0 = _last
    if t - t0 >= QUIET_LOOKBACK_S:
        return _quiet(max(0.0, (busy - busy0) - (own - own0)) / (t - t0))
    return _last_window_quiet


def _read_machine() -> tuple[Any, float] | None:
    """The machine's CPU times and this process's CPU seconds now: from /proc where it stands in
    for psutil (`reads_proc`), else psutil's; None without either."""
    global _me
    if reads_proc(psutil):
        try:
            return proc_cpu_times(), own_cpu_seconds()
        except OSError:
            pass  # psutil answers from now on
    if _psutil() is None:
        return None
    if _me is None or _me.pid != os.getpid():  # a forked child is another process
        _me = psutil.Process()
    ct = _me.cpu_times()
    return psutil.cpu_times(), ct.user + ct.system


def host_mark(start: HostMark | None = None, *, listing: bool = False) -> HostMark | None:
    """The machine's CPU time now: a window's start (no `start`) or its end (`start` given).

    The start lists every process only when the machine was not just seen quiet, or when asked
    (`listing`: a run with helper processes of its own, whose CPU is the run's only if they are
    named); the end lists them exactly when its start did, so their deltas cover the same window.
    A start within REUSE_LISTING_S of the last end's listing takes that listing (host_noise divides
    the names' figures by the span from it)."""
    global _last, _end_listing
    read = _read_machine()
    if read is None:
        return None
    me = os.getpid()
    t, wall, (cpu, own) = time.monotonic(), time.time(), read
    if start is not None:
        listing = start.procs is not None
    else:
        listing = listing or not _recently_quiet(t, _busy(cpu), own)
    _last = (t, _busy(cpu), own)
    if not listing:
        return HostMark(t, wall, cpu, own, None)
    if start is None:
        last = _end_listing
        if last is not None and last[2] == me and 0.0 <= t - last[0] <= REUSE_LISTING_S:
            return HostMark(t, wall, cpu, own, last[3], listed_t=last[0], listed_wall=last[1])
        return HostMark(t, wall, cpu, own, process_cpu_seconds(me))
    procs = process_cpu_seconds(me)
    _end_listing = (time.monotonic(), time.time(), me, procs)
    return HostMark(t, wall, cpu, own, procs)


def host_noise(a: HostMark | None, b: HostMark | None, own_pids: Collection[int] = ()) -> dict[str, Any]:
    """The window's CPU use: this process's, the rest of the machine's, the top others named.

    `own_pids` are processes the run started for itself (a data loader's workers, named by the
    workload): their CPU time is the run's own, not competition. Only those exact PIDs: a child
    the run did not name (a user's CPU burner) is still another process. They can be told apart
    only in a listed window (`host_mark(listing=True)` at its start)."""
    global _last_window_quiet
    if a is None or b is None:
        return {}
    window = b.t - a.t
    if window <= 0:
        return {"window_s": window}
    own = (b.own - a.own) / window
    machine = (_busy(b.cpu) - _busy(a.cpu)) / window
    per: list[tuple[int, float]] = []
    helpers = 0.0
    # The processes' deltas span from a's listing, which may be the last window's end (host_mark).
    listed_t = a.t if a.listed_t is None else a.listed_t
    listed_wall = a.wall if a.listed_wall is None else a.listed_wall
    span = max(window, b.t - listed_t)
    for key, secs in (b.procs or {}).items():
        if a.procs is None:
            break
        if key in a.procs:
            used = secs - a.procs[key]
        elif key[1] >= listed_wall - 0.05:  # started inside the span: all its time is in it
            used = secs
        else:
            continue  # existed before but was not readable then
        if key[0] in own_pids:
            helpers += used / span
        elif used / span >= 0.01:  # a daemon's tick is not worth naming
            per.append((key[0], used / span))
    own += helpers
    per.sort(key=lambda x: -x[1])
    steal = (getattr(b.cpu, "steal", 0.0) - getattr(a.cpu, "steal", 0.0)) / window
    other = max(0.0, machine - own, sum(c for _, c in per))
    _last_window_quiet = _quiet(other)
    return {
        "window_s": window,
        "cores": _cpu_count() or 1,
        "own_cores": own,  # with the run's own helper processes (own_helper_cores of it)
        "own_helper_cores": helpers,
        # The machine-wide figure also catches processes too short-lived to be named.
        "other_cores": other,
        "other_top": [{"name": _name(pid), "pid": pid, "cores": c} for pid, c in per[:KEEP]],
        "other_listed": a.procs is not None and b.procs is not None,
        "listed_s": span if a.procs is not None and b.procs is not None else None,  # the names' span
        "steal_cores": max(0.0, steal),
    }


# -- GPU (through the NVML wrapper in telemetry) ------------------------------------------
@dataclass
class GpuMark:
    wall_us: int
    violations: dict[str, tuple[int, int]]  # policy -> (reference time µs, violation time ns)
    others: dict[int, int | None]  # pid -> used GPU memory (bytes) of other processes
    unknown: int = 0  # processes NVML lists under PIDs of another namespace: ours or not, untold


def _pid_visible(pid: int) -> bool:
    if os.path.isdir("/proc"):
        return os.path.exists(f"/proc/{pid}")
    return ps.pid_exists(pid) if (ps := _psutil()) is not None else True


def split_processes(
    procs: Sequence[Any], me: int, expect_own: bool = False
) -> tuple[dict[int, int | None], dict[int, int | None], int]:
    """NVML's processes on a GPU as (ours, others, how many cannot be told), by pid -> memory.

    In a container's PID namespace NVML reports host PIDs, none of them ours and most not
    visible here. Those are not "other processes": when this process is known to hold the
    GPU (`expect_own`) and exactly one such PID is listed, it is this process; otherwise
    they are counted as unknown ("cannot tell in a container").
    """
    own: dict[int, int | None] = {}
    others: dict[int, int | None] = {}
    foreign: dict[int, int | None] = {}
    for p in procs:
        pid, mem = int(p.pid), getattr(p, "usedGpuMemory", None)
        if pid == me:
            own[pid] = mem
        elif _pid_visible(pid):
            others[pid] = mem
        else:
            foreign[pid] = mem
    if not own and expect_own and len(foreign) == 1:
        return foreign, others, 0
    return own, others, len(foreign)


def gpu_mark(nvml: Any, index: int) -> GpuMark:
    h = nvml.call("nvmlDeviceGetHandleByIndex", index)
    violations: dict[str, tuple[int, int]] = {}
    others: dict[int, int | None] = {}
    if h is not None:
        for name, policy in VIOLATION_POLICIES.items():
            v = nvml.call("nvmlDeviceGetViolationStatus", h, policy)
            if v is not None:
                violations[name] = (int(v.referenceTime), int(v.violationTime))
        procs = [
            p
            for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses")
            for p in nvml.call(fn, h) or []
        ]
        # Called during a run on this GPU: this process holds a context on it.
        _own, others, unknown = split_processes(procs, os.getpid(), expect_own=True)
        return GpuMark(int(time.time() * 1e6), violations, others, unknown)
    return GpuMark(int(time.time() * 1e6), violations, others)


def gpu_noise(nvml: Any, index: int, a: GpuMark, b: GpuMark, samples: Sequence[Any]) -> dict[str, Any]:
    """Other GPU processes, throttling and clocks over the window; `samples` are GpuSnapshots."""
    out: dict[str, Any] = {"index": index}
    pids = {**a.others, **b.others}
    out["other_processes"] = [{"pid": pid, "name": _name(pid), "mem_bytes": mem} for pid, mem in pids.items()]
    unknown = max(a.unknown, b.unknown)
    if unknown:
        out["unknown_processes"] = unknown
    sm = _others_sm_util(nvml, index, a, pids)
    if sm is not None:
        out["other_sm_util_percent"] = sm
    out["throttled_fraction"], out["throttle_source"] = _throttling(a, b, samples)
    clocks = [s.sm_clock_mhz for s in samples if s.sm_clock_mhz is not None]
    if clocks:
        out["sm_clock_mhz"] = {"min": min(clocks), "mean": sum(clocks) / len(clocks), "max": max(clocks)}
    maxima = [s.sm_clock_max_mhz for s in samples if s.sm_clock_max_mhz is not None]
    out["sm_clock_max_mhz"] = max(maxima) if maxima else None
    return out


def _others_sm_util(nvml: Any, index: int, a: GpuMark, pids: Mapping[int, Any]) -> int | None:
    """The busiest other process's SM use since `a` (%); None when NVML cannot say."""
    h = nvml.call("nvmlDeviceGetHandleByIndex", index)
    util = nvml.call("nvmlDeviceGetProcessUtilization", h, a.wall_us) if h is not None and pids else None
    if not util:
        return None
    sm = [s.smUtil for s in util if s.pid in pids and s.smUtil is not None]
    return max(sm) if sm else 0


def _throttling(a: GpuMark, b: GpuMark, samples: Sequence[Any]) -> tuple[dict[str, float], dict[str, str]]:
    """The fraction of the window each throttle reason held, and where each figure came from:
    NVML's violation counters where both marks have them, else the sampled reason bits."""
    throttled: dict[str, float] = {}
    source = {}
    for name in VIOLATION_POLICIES:
        if name in a.violations and name in b.violations:
            (r0, v0), (r1, v1) = a.violations[name], b.violations[name]
            span_ns = (r1 - r0) * 1000 if r1 > r0 else (b.wall_us - a.wall_us) * 1000
            if span_ns > 0:
                throttled[name] = min(1.0, max(0.0, (v1 - v0) / span_ns))
                source[name] = "NVML violation counter"
    reasons = [s.throttle_reasons for s in samples if getattr(s, "throttle_reasons", None) is not None]
    if not reasons:
        return throttled, source
    masks: dict[str, int] = {}
    for bit, name in THROTTLE_BITS.items():
        masks[name] = masks.get(name, 0) | bit
    for name, mask in masks.items():
        if name in throttled:
            continue  # the violation counter is exact; samples only estimate
        throttled[name] = sum(1 for r in reasons if r & mask) / len(reasons)
        source[name] = f"throttle reasons, {len(reasons)} samples"
    return throttled, source


# -- the warnings, in words ---------------------------------------------------------------
def _cores(x: float) -> str:
    return f"{x:.1f} core" + ("" if round(x, 1) == 1.0 else "s")


def host_warnings(host: dict[str, Any] | None, during: str = "this run") -> list[str]:
    if not host or "other_cores" not in host:
        return []
    out = []
    other, cores = host["other_cores"], host.get("cores") or 1
    enough = other * host.get("window_s", 0.0) >= OTHER_CPU_MIN_SECONDS
    if enough and other >= max(OTHER_CPU_MIN_CORES, OTHER_CPU_CORE_FRACTION * cores):
        top = ", ".join(
            f"{p['name']} (pid {p['pid']}) {p['cores']:.1f}" for p in host.get("other_top", [])[:TOP]
        )
        out.append(
            f"other processes used {_cores(other)} of {cores} during {during}"
            + (f": {top}" if top else "")
            + ("" if host.get("other_listed", True) else " (not named: it was quiet just before)")
            + f"; {during} used {_cores(host.get('own_cores', 0.0))}"
        )
    if host.get("steal_cores", 0.0) >= STEAL_MIN_CORES:
        out.append(f"the hypervisor took {_cores(host['steal_cores'])} (steal time) during {during}")
    return out


def gpu_warnings(gpu: dict[str, Any] | None) -> list[str]:
    if not gpu:
        return []
    out = []
    others = gpu.get("other_processes") or []
    if others:
        named = ", ".join(
            p["name"] + (f" {p['mem_bytes'] / 2**30:.1f} GiB" if p.get("mem_bytes") else "")
            for p in others[:TOP]
        )
        sm = gpu.get("other_sm_util_percent")
        share = f", up to {sm}% of its SMs" if sm else ""
        out.append(
            f"{len(others)} other process(es) on GPU {gpu.get('index')} during this run: {named}{share}"
        )
    if gpu.get("unknown_processes"):
        out.append(
            f"cannot tell in a container whether other processes used GPU {gpu.get('index')}: NVML lists "
            f"{gpu['unknown_processes']} process(es) under PIDs of another namespace"
        )
    for name, frac in sorted((gpu.get("throttled_fraction") or {}).items()):
        if frac >= THROTTLE_MIN_FRACTION:
            out.append(f"GPU {name}-throttled during {100 * frac:.0f} % of the run")
    return out


def stability(rel_iqr: float | None, n: int) -> str:
    """'' for a stable run, else how unstable (pyperf's check, on the median and IQR)."""
    if rel_iqr is None or n < 4 or rel_iqr != rel_iqr or rel_iqr <= UNSTABLE_REL_IQR:
        return ""
    return (
        f"unstable: the middle half of the step times spans {100 * rel_iqr:.0f} % of their median, "
        f"more than the {100 * UNSTABLE_REL_IQR:.0f} % a steady run stays within"
    )


def unstable_advice(min_step_s: float | None) -> str:
    # Words every measuring command accepts (run, compare and sweep all take --budget and --preset;
    # only run takes --repeat, and compare once suggested it): tests/cli/test_newuser.py checks.
    advice = "close other programs, time longer (--budget SECONDS, or --preset published)"
    if min_step_s is not None and min_step_s < 1e-3:
        advice += ", a larger size (steps under 1 ms are at the mercy of the timer and the scheduler)"
    return advice + ", then rerun and compare"


def noise_warnings(
    telemetry: dict[str, Any], rel_iqr: float | None, n: int, min_step_s: float | None, advice: bool = True
) -> list[str]:
    noise = telemetry.get("noise") or {}
    out = [*host_warnings(noise.get("host")), *gpu_warnings(noise.get("gpu"))]
    unstable = stability(rel_iqr, n)
    if unstable:
        out.append(f"{unstable}; {unstable_advice(min_step_s)}" if advice else unstable)
    return out
