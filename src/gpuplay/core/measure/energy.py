"""Energy per step from the hardware's own energy counters, or a plain reason why not.

Two counters, both cumulative and both coarse:

- NVIDIA GPUs: NVML's total-energy counter (millijoules since the driver loaded). It moves in
  steps about every 100 ms, so a window shorter than several of its updates reads mostly
  quantisation: the steps are repeated until the window spans at least `MIN_UPDATES` of them,
  and the window is aligned to the counter's own ticks. Scope: the whole board (every process
  on it, fans and memory included), said beside the figure.
- CPUs: RAPL (/sys/class/powercap/intel-rapl:N/energy_uj, one per package), readable by root
  only on most systems since 2020 (a side channel); otherwise "n/a (needs root)".

An idle baseline is measured just before, over a window as long, and its power times the
active window's length is subtracted: what is left is the energy the steps added. The energy
window follows the timed phase, after which a board's clocks, temperature and power stay high
for a while: an idle window taken at once reads the cooling board (a simulated H100 cooling
with a 0.3 s time constant read 214 W against its 70 W idle). So idle windows are repeated
until one reads no more than SETTLED below the one before (power has settled), for at most
MAX_SETTLE_S, and the record says how long that took, or that power was still falling.
A window in which the counter did not tick twice reads "below resolution", never 0.
"""

from __future__ import annotations

import contextlib
import glob
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

MIN_UPDATES = 5  # counter updates a window must span
MIN_WINDOW_S = 0.5
MAX_WINDOW_S = 5.0  # a slow step ends the window at the step after this, however few ticks
TICK_POLL_S = 0.002
SETTLED = 0.03  # an idle window reading less than 3 % below the one before: power has settled
MAX_SETTLE_S = 6.0  # the longest wait for it, idle windows included
RAPL_ROOT = "/sys/class/powercap"


class EnergyCounter(Protocol):
    scope: str
    source: str
    update_s: float  # how often the counter moves

    def read_j(self) -> float | None: ...


@dataclass
class Energy:
    status: str  # ok | below resolution | n/a (...)
    scope: str = ""
    source: str = ""
    joules_per_step: float | None = None  # above idle
    gflop_per_j: float | None = None
    idle_w: float | None = None
    active_w: float | None = None
    window_s: float | None = None
    steps: int = 0
    idle_settle_s: float | None = None  # how long the idle baseline waited for power to settle
    idle_note: str = ""  # set when power was still falling at the baseline

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def text(self) -> str:
        """One line for the stats panel and the notes."""
        if self.status != "ok" or self.joules_per_step is None:
            return f"energy: {self.status}" + (f" ({self.scope})" if self.scope else "")
        rate = f", {self.gflop_per_j:.3g} GFLOP/J" if self.gflop_per_j else ""
        settle = f" after {self.idle_settle_s:.1f} s settling" if self.idle_settle_s else ""
        if self.idle_note:
            settle = f"; {self.idle_note}"
        return (
            f"energy: {fmt_joules(self.joules_per_step)}/step above idle{rate} "
            f"({self.scope}; idle {self.idle_w:.3g} W{settle}, {self.steps} steps over {self.window_s:.2f} s)"
        )


def fmt_joules(j: float) -> str:
    if j >= 1:
        return f"{j:.3g} J"
    if j >= 1e-3:
        return f"{j * 1e3:.3g} mJ"
    return f"{j * 1e6:.3g} µJ"


# -- counters --------------------------------------------------------------------------------
class NvmlCounter:
    source = "NVML total-energy counter"
    update_s = 0.1

    def __init__(self, nvml: Any, handle: Any, index: int, scope: str = "") -> None:
        self.nvml, self.handle = nvml, handle
        self.scope = scope or f"whole board of GPU {index}, every process on it"

    def read_j(self) -> float | None:
        try:
            mj = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except Exception:  # NVMLError_NotSupported on boards without the counter
            return None
        return mj / 1000.0 if mj is not None else None


class RaplCounter:
    source = "RAPL package energy (energy_uj)"
    update_s = 0.001

    def __init__(self, domains: list[str]) -> None:
        self.domains = domains  # folders intel-rapl:N (packages; their subzones are inside them)
        self.scope = f"{len(domains)} CPU package(s), every process and core on them"
        self.ranges = [_read_int(os.path.join(d, "max_energy_range_uj")) or 2**32 for d in domains]
        self.last: list[int | None] = [None] * len(domains)
        self.total_uj = 0

    def read_j(self) -> float | None:
        for i, d in enumerate(self.domains):
            now = _read_int(os.path.join(d, "energy_uj"))
            if now is None:
                return None
            prev = self.last[i]
            if prev is not None:
                self.total_uj += now - prev if now >= prev else now + self.ranges[i] - prev  # wrapped
            self.last[i] = now
        return self.total_uj / 1e6


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def rapl_counter(root: str = RAPL_ROOT) -> tuple[RaplCounter | None, str]:
    """The packages' RAPL counter, or why there is none: 'n/a (no RAPL)' / 'n/a (needs root)'."""
    domains = sorted(d for d in glob.glob(os.path.join(root, "intel-rapl:*")) if d.count(":") == 1)
    if not domains:
        return None, "n/a (no RAPL)"
    for d in domains:
        try:
            with open(os.path.join(d, "energy_uj")) as f:
                int(f.read().strip())
        except PermissionError:
            return None, "n/a (needs root)"
        except (OSError, ValueError):
            return None, "n/a (RAPL unreadable)"
    return RaplCounter(domains), ""


def nvml_counter(device: str) -> tuple[NvmlCounter | None, str]:
    """The energy counter of the board `device` ('cuda:N') runs on, matched by UUID as
    telemetry matches it: CUDA's ordinal is not NVML's (CUDA_VISIBLE_DEVICES reorders and
    hides boards, CUDA numbers fastest first, NVML by PCI bus), so an index would read another
    board's joules. A MIG instance has no counter of its own: its parent GPU's is read, said so."""
    from gpuplay.core.measure import telemetry

    if telemetry.nvml_status():
        return None, "n/a (no NVML)"
    target = telemetry.nvml_handle_for_cuda_device(device)
    if target is None:
        return None, f"n/a (cannot tell which NVML board {device} is: no UUID match)"
    scope = f"whole board of NVML GPU {target.nvml_index} ({target.uuid}), every process on it"
    if target.mig:
        scope = (
            f"whole parent GPU {target.nvml_index} of MIG instance {target.uuid}, "
            "its other instances and every process on it"
        )
    counter = NvmlCounter(telemetry.nvml.module, target.handle, target.nvml_index, scope)
    if counter.read_j() is None:
        return None, "n/a (this GPU has no energy counter)"
    return counter, ""


def counter_for(device: str) -> tuple[EnergyCounter | None, str]:
    if device == "cpu":  # first: AMD's glue is a CUDA device's question (~3 ms of a CPU run's)
        return rapl_counter()
    if device.startswith("cuda"):
        from gpuplay.core.hw import amd

        if amd.rocm_torch() is not None:  # AMD under ROCm: amdsmi's counter
            return amd.energy_counter(device)
        return nvml_counter(device)
    return None, "n/a (no energy counter for this device)"


# -- measuring ----------------------------------------------------------------------------
def _next_tick(counter: EnergyCounter, clock: Callable[[], float], sleep: Callable[[float], None],
               timeout: float) -> tuple[float, float] | None:  # fmt: skip
    """Wait for the counter to move; (time, joules) just after it did."""
    first = counter.read_j()
    if first is None:
        return None
    t_end = clock() + timeout
    while clock() < t_end:
        sleep(TICK_POLL_S)
        now = counter.read_j()
        if now is None:
            return None
        if now != first:
            return clock(), now
    return None


def measure_energy(
    counter: EnergyCounter,
    step: Callable[[], Any],
    *,
    flops: float = 0.0,
    sync: Callable[[], None] = lambda: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    cancelled: Callable[[], bool] = lambda: False,
) -> Energy:
    """Idle baseline, then steps repeated over at least MIN_UPDATES counter updates."""
    window = max(MIN_WINDOW_S, MIN_UPDATES * counter.update_s)
    na = Energy("below resolution", counter.scope, counter.source)
    tick_timeout = 4 * counter.update_s + 0.5
    idle = _settled_idle(counter, window, clock, sleep, tick_timeout, cancelled)
    if idle is None:
        return na
    idle_w, idle_end, settle_s, settled = idle
    na.idle_settle_s = settle_s
    note = "" if settled else f"power still falling after {settle_s:.1f} s: the idle baseline may read high"
    t0, e0 = idle_end
    steps = 0
    while True:
        step()
        steps += 1
        sync()
        if clock() - t0 >= window or clock() - t0 >= MAX_WINDOW_S or cancelled():
            break
    end = _next_tick(counter, clock, sleep, tick_timeout)  # the counter's next update closes it
    if end is None:
        return na
    t1, e1 = end
    elapsed = t1 - t0
    above = (e1 - e0) - idle_w * elapsed
    # Below a millijoule (the NVML counter's unit) or 1% of the idle energy in the window (the
    # idle baseline's own uncertainty), the difference is the counter's noise, not the steps.
    floor = max(1e-3, 0.01 * idle_w * elapsed)
    if e1 == e0 or above <= floor:
        return Energy("below resolution", counter.scope, counter.source, idle_w=idle_w,
                      window_s=elapsed, steps=steps, idle_settle_s=settle_s, idle_note=note)  # fmt: skip
    per_step = above / steps
    return Energy(
        "ok",
        counter.scope,
        counter.source,
        joules_per_step=per_step,
        gflop_per_j=flops / per_step / 1e9 if flops else None,
        idle_w=idle_w,
        active_w=(e1 - e0) / elapsed if elapsed > 0 else None,
        window_s=elapsed,
        steps=steps,
        idle_settle_s=settle_s,
        idle_note=note,
    )


def _settled_idle(
    counter: EnergyCounter,
    window: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    tick_timeout: float,
    cancelled: Callable[[], bool],
) -> tuple[float, tuple[float, float], float, bool] | None:
    """The idle power once it has settled: (watts, the last window's end tick, seconds waited,
    settled), idle windows repeated while each reads over SETTLED below the one before; None
    when the counter stops ticking."""
    start = _next_tick(counter, clock, sleep, tick_timeout)
    if start is None:
        return None
    first, before = start, None
    while True:
        sleep(window)  # idle: the same counter, nothing running, for as long as the active window
        end = _next_tick(counter, clock, sleep, tick_timeout)
        if end is None:
            return None
        watts = (end[1] - start[1]) / (end[0] - start[0]) if end[0] > start[0] else 0.0
        waited = end[0] - first[0]
        if before is not None and watts >= before * (1 - SETTLED):
            return watts, end, waited, True
        if waited >= MAX_SETTLE_S or cancelled():
            return watts, end, waited, False
        before, start = watts, end


def energy_for(device: str, step: Callable[[], Any], flops: float, sync: Callable[[], None],
               cancelled: Callable[[], bool] = lambda: False,
               on_start: Callable[[], object] = lambda: None) -> Energy:  # fmt: skip
    """Energy per step of `step` on `device`, or a reason there is no figure. `on_start` is
    called only when there is a counter to measure with (a phase worth showing)."""
    counter, reason = counter_for(device)
    if counter is None:
        return Energy(reason)
    on_start()
    with contextlib.suppress(Exception):
        return measure_energy(counter, step, flops=flops, sync=sync, cancelled=cancelled)
    return Energy("n/a (the counter failed mid-window)", counter.scope, counter.source)


def energy_of(telemetry: dict[str, Any] | None) -> Energy | None:
    """The energy a result's telemetry holds (from a log too: bounded, unknown keys dropped)."""
    d = (telemetry or {}).get("energy")
    if not isinstance(d, dict) or not isinstance(d.get("status"), str):
        return None
    fields = Energy.__dataclass_fields__
    clean: dict[str, Any] = {}
    for k, v in d.items():
        if k not in fields:
            continue
        if k in ("status", "scope", "source", "idle_note"):
            clean[k] = str(v)[:200]
        elif k == "steps":
            clean[k] = int(v) if isinstance(v, int | float) and math.isfinite(v) else 0
        else:
            clean[k] = float(v) if isinstance(v, int | float) and math.isfinite(v) else None
    return Energy(**clean)
