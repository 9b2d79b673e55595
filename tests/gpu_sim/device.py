"""The simulated device: a clock, the work it runs, and the counters that follow that work.

The CPU is the device. A "kernel" is a torch op on a simulated-device tensor; it runs on the CPU
synchronously, and the time it takes is the device's busy time. The device clock is the host's
monotonic clock, so every clock gpuplay reads (CUDA events, NVML's GPM sample times, the energy
counter's, the telemetry sampler's) agrees with the others: a window over idle host time (the
NumPy side of a paired run) shows the device idle, a window over a cache flush shows the flush.

From the busy intervals, each of a kind (matmul, memset, elementwise, copy):
- utilisation: the busy fraction over NVML's sample period (the last 1/6 s);
- power: each kind's draw while busy; once idle it decays towards idle power with a time
  constant (clocks and temperature stay high after a hot phase), and the energy counter is the
  integral of that power, in millijoules;
- GPM counters: per kind, a rate (SM %, tensor %, DRAM %) times the seconds busy;
- memory: the bytes of live simulated tensors (the caching allocator's "allocated"), its peak
  since the last reset, and a free figure that shrinks as they grow.

Every figure here is of the simulation: nothing measures a GPU. The ledger (a JSON-lines file
named by GPUPLAY_TEST_SIM_LEDGER) records what happened, for a test to read after the process.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

LEDGER_ENV = "GPUPLAY_TEST_SIM_LEDGER"
KIND_ENV = "GPUPLAY_TEST_SIM"

IDLE_W = 70.0
POWER_LIMIT_W = 700.0
ENERGY_TICK_S = 0.1  # NVML's energy counter moves about every 100 ms
COOL_TAU_S = 0.3  # how long the board's power takes to fall 1/e of the way to idle once idle
UTIL_PERIOD_S = 1 / 6  # NVML's utilisation sample period (1/6 s to 1 s, by product)

# What each kind of kernel draws and keeps busy: watts, and GPM rates (percent of the unit's peak).
KINDS: dict[str, dict[str, float]] = {
    "matmul": {"watts": 650.0, "sm": 95.0, "tensor": 70.0, "dram": 25.0},  # on tensor cores
    "matmul_fp32": {"watts": 550.0, "sm": 95.0, "tensor": 0.0, "dram": 25.0},  # IEEE fp32: FMA units
    "memset": {"watts": 420.0, "sm": 15.0, "tensor": 0.0, "dram": 95.0},
    "copy": {"watts": 300.0, "sm": 10.0, "tensor": 0.0, "dram": 60.0},
    "elementwise": {"watts": 380.0, "sm": 60.0, "tensor": 0.0, "dram": 70.0},
}


@dataclass(frozen=True)
class Profile:
    """What the simulated board says it is."""

    name: str
    uuid: str
    total_memory: int
    l2_bytes: int
    major: int
    minor: int
    sms: int
    arch: str  # for GPM: "hopper" has it
    device_type: str = "cuda"  # torch's name for it: "cuda" (NVIDIA, or AMD under ROCm), "xpu"
    vendor: str = "NVIDIA"  # NVIDIA's boards have NVML (simnvml.py); the others have none here
    gcn_arch: str = ""  # AMD's gcnArchName, as torch's ROCm build reports it
    driver_version: str = ""  # torch.xpu's driver_version
    has_fp64: bool = True
    # A queued device: each kernel is issued and the host goes on, the device running it after
    # what was issued before, for at least `matmul_device_s` where it is a matmul. Only an event
    # or a synchronisation sees that time; a host clock around the launches does not.
    asynchronous: bool = False
    matmul_device_s: float = 0.0


H100 = Profile(
    name="NVIDIA H100 80GB HBM3 (simulated by gpuplay's tests)",
    # NVML's spelling: GPU- and 32 hex digits; "5e1a" + "0000…" read as "simulated" to a person,
    # and the name says so to everyone.
    uuid="GPU-5e1a7ed0-0000-4000-8000-000000000001",
    total_memory=80 * 2**30,
    l2_bytes=50 * 2**20,
    major=9,
    minor=0,
    sms=132,
    arch="hopper",
)
MI300 = Profile(
    name="AMD Instinct MI300X (simulated by gpuplay's tests)",
    uuid="GPU-5e1a7ed0-0000-4000-8000-000000000300",
    total_memory=192 * 2**30,
    l2_bytes=4 * 2**20,
    major=9,
    minor=4,
    sms=304,  # compute units
    arch="cdna3",
    vendor="AMD",
    gcn_arch="gfx942:sramecc+:xnack-",
)
XPU = Profile(
    name="Intel(R) Data Center GPU Max 1550 (simulated by gpuplay's tests)",
    uuid="GPU-5e1a7ed0-0000-4000-8000-000000000175",
    total_memory=64 * 2**30,
    l2_bytes=204 * 2**20,
    major=12,
    minor=60,
    sms=448,  # Xe cores' execution units / 8: what max_compute_units says per tile
    arch="xe-hpc",
    device_type="xpu",
    vendor="Intel",
    driver_version="1.6.31294",
    asynchronous=True,
    matmul_device_s=0.02,
)
PROFILES = {"h100": H100, "mi300": MI300, "xpu": XPU}
CONTEXT_BYTES = 512 * 2**20  # what the CUDA context holds: mem_get_info's free excludes it


@dataclass
class _Busy:
    t0: float
    t1: float
    kind: str


@dataclass
class SimDevice:
    profile: Profile = H100
    lock: threading.RLock = field(default_factory=threading.RLock)
    intervals: deque[_Busy] = field(default_factory=lambda: deque(maxlen=200_000))
    busy_s: dict[str, float] = field(default_factory=dict)  # per kind, since start
    kernels: dict[str, int] = field(default_factory=dict)  # per op name
    gpm: dict[str, float] = field(default_factory=dict)  # unit -> percent-seconds
    energy_mj: float = 1_000_000.0
    _t_energy: float = field(default_factory=time.monotonic)
    _p_since: float = IDLE_W  # power when the device last went idle
    _idle_since: float | None = None  # None: never busy yet
    _running: str | None = None  # the kind of the kernel running now
    _tick: int = -1  # the energy counter's last update (ENERGY_TICK_S units) and its value then
    _tick_mj: int = 0
    allocated: int = 0
    peak: int = 0
    live: dict[int, list[int]] = field(default_factory=dict)  # storage ptr -> [bytes, refs]
    flushes: int = 0
    queue_end: float = 0.0  # a queued device: when the work issued so far is done
    syncs: int = 0

    # -- the clock and the work ---------------------------------------------------------------
    @staticmethod
    def now() -> float:
        return time.monotonic()

    def run(self, name: str, kind: str, fn: Any, modelled_s: float | None = None) -> Any:
        """Run `fn` as one kernel of `kind` on the device: its time is the device's busy time, or
        `modelled_s` from its start where given (`fn` then waits at least that long: the host
        may wake later, on a loaded machine, without the device being busy meanwhile)."""
        if self.profile.asynchronous:
            return self._queue(name, kind, fn, modelled_s)
        t0 = self.now()
        with self.lock:
            self._advance_energy(t0)
            self._running = kind
        try:
            return fn()
        finally:
            t_end = self.now()
            t1 = t_end if modelled_s is None else min(t_end, t0 + modelled_s)
            with self.lock:
                self._advance_energy(t1)
                self._running = None
                self._idle_since, self._p_since = t1, KINDS[kind]["watts"]
                self._advance_energy(t_end)
                self.intervals.append(_Busy(t0, t1, kind))
                self.busy_s[kind] = self.busy_s.get(kind, 0.0) + (t1 - t0)
                self.kernels[name] = self.kernels.get(name, 0) + 1
                for unit in ("sm", "tensor", "dram"):
                    self.gpm[unit] = self.gpm.get(unit, 0.0) + KINDS[kind][unit] * (t1 - t0)

    def _queue(self, name: str, kind: str, fn: Any, modelled_s: float | None) -> Any:
        """A queued device's kernel: computed on the host now (so its result is there), run by the
        device after the work issued before it, for its host time or the modelled time, whichever
        is longer. The host goes on at once; `drain` (a synchronisation) waits for the device.
        No power or energy is modelled here: only NVIDIA's board has counters (NVML)."""
        h0 = self.now()
        out = fn()
        host_s = self.now() - h0
        floor = self.profile.matmul_device_s if kind.startswith("matmul") else 0.0
        busy = max(host_s, modelled_s or 0.0, floor)
        with self.lock:
            t0 = max(h0, self.queue_end)
            t1 = t0 + busy
            self.queue_end = t1
            self.intervals.append(_Busy(t0, t1, kind))
            self.busy_s[kind] = self.busy_s.get(kind, 0.0) + busy
            self.kernels[name] = self.kernels.get(name, 0) + 1
        if floor:
            ledger("kernel", name=name, kind=kind, t0=t0, t1=t1, t_host=self.now())
        return out

    def reached(self) -> float:
        """When the device reaches what is issued now: at once when idle, else when its queue drains."""
        with self.lock:
            return max(self.now(), self.queue_end)

    def drain(self, until: float | None = None) -> None:
        """The host waits for the device (to `until`, or all issued work): a synchronisation."""
        end = self.queue_end if until is None else until
        wait = end - self.now()
        if wait > 0:
            time.sleep(wait)
        self.syncs += 1

    # -- power and energy -----------------------------------------------------------------------
    def power_w(self) -> float:
        """The board's power now: a kind's draw while busy; decaying towards idle after."""
        t = self.now()
        with self.lock:
            if self._running is not None:
                return KINDS[self._running]["watts"]
            if self._idle_since is None:
                return IDLE_W
            return IDLE_W + (self._p_since - IDLE_W) * math.exp(-(t - self._idle_since) / COOL_TAU_S)

    def _advance_energy(self, t: float) -> None:
        t0 = self._t_energy
        if t <= t0:
            return
        if self._running is not None:
            joules = KINDS[self._running]["watts"] * (t - t0)
        elif self._idle_since is None:
            joules = IDLE_W * (t - t0)
        else:  # idle: the integral of the decaying power from t0 to t
            a, b = t0 - self._idle_since, t - self._idle_since
            decay = math.exp(-a / COOL_TAU_S) - math.exp(-b / COOL_TAU_S)
            joules = IDLE_W * (t - t0) + (self._p_since - IDLE_W) * COOL_TAU_S * decay
        self.energy_mj += joules * 1000.0
        self._t_energy = t

    def energy_now_mj(self) -> int:
        """The energy counter as NVML reads it: the integral of power, updated every ENERGY_TICK_S."""
        t = self.now()
        with self.lock:
            self._advance_energy(t)
            tick = int(t / ENERGY_TICK_S)
            if tick != self._tick:
                self._tick, self._tick_mj = tick, int(self.energy_mj)
            return self._tick_mj

    # -- utilisation --------------------------------------------------------------------------
    def busy_between(self, t0: float, t1: float, kind: str | None = None) -> float:
        """Seconds busy (of `kind`, or any) between t0 and t1."""
        total = 0.0
        with self.lock:
            for b in reversed(self.intervals):
                if b.t1 <= t0:
                    break
                if kind is None or b.kind == kind:
                    total += max(0.0, min(b.t1, t1) - max(b.t0, t0))
        return total

    def util_percent(self) -> int:
        t = self.now()
        return round(100.0 * self.busy_between(t - UTIL_PERIOD_S, t) / UTIL_PERIOD_S)

    # -- memory ---------------------------------------------------------------------------------
    def hold(self, ptr: int, nbytes: int) -> bool:
        """A tensor now refers to storage `ptr` of `nbytes`; True when it is a new allocation."""
        with self.lock:
            entry = self.live.get(ptr)
            if entry is not None:
                entry[1] += 1
                return False
            self.live[ptr] = [nbytes, 1]
            self.allocated += nbytes
            self.peak = max(self.peak, self.allocated)
            return True

    def release(self, ptr: int) -> None:
        with self.lock:
            entry = self.live.get(ptr)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del self.live[ptr]
                self.allocated -= entry[0]

    def reset_peak(self) -> None:
        with self.lock:
            self.peak = self.allocated
        ledger("reset_peak_memory_stats", allocated=self.allocated)

    def free_bytes(self) -> int:
        return max(0, self.profile.total_memory - CONTEXT_BYTES - self.allocated)

    def totals(self) -> dict[str, Any]:
        """What the device has done so far, for a ledger line."""
        with self.lock:
            return {
                "busy_s": {k: round(v, 6) for k, v in self.busy_s.items()},
                "gpm_percent_s": {k: round(v, 6) for k, v in self.gpm.items()},
                "flushes": self.flushes,
                "allocated": self.allocated,
                "peak": self.peak,
            }


_device: SimDevice | None = None
_ledger_lock = threading.Lock()


def device() -> SimDevice:
    """This process's simulated device, of the kind GPUPLAY_TEST_SIM names (default h100)."""
    global _device
    if _device is None:
        _device = SimDevice(PROFILES.get(os.environ.get(KIND_ENV) or "h100", H100))
    return _device


def ledger(event: str, **fields: Any) -> None:
    """One line in the ledger file (when the environment names one): what happened, when, where."""
    path = os.environ.get(LEDGER_ENV)
    if not path:
        return
    line = {"event": event, "t": time.monotonic(), "pid": os.getpid(), **fields}
    text = json.dumps(line, default=str) + "\n"
    with _ledger_lock:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
        except OSError:
            pass
