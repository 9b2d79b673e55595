"""A cold-cache run's device figures without its cache flush.

A cold run zeroes a buffer larger than the L2 before each step (256 MiB on an H100), outside the
step's timing but inside the telemetry window: the device's utilisation, power, energy and GPM
activity (DRAM above all: a memset is all DRAM traffic) would count the flushes as the steps'.
Counters cannot be split after the fact, so the flush is measured apart: a window of flushes
alone (each followed by a sync, as between steps), at least FLUSH_WINDOW_S long (past NVML's
1-second averaging), gives each flush's time, energy and activity; the timed window's figures
are then those of its time less its flushes':

    rate_steps = (rate_window × T_window − rate_flushes × n × τ) / (T_window − F)

with n the flushes in the timed window, τ one flush's time alone (so rate_flushes × τ is one
flush's counts) and F the time the timed window spent in its flushes, as the host saw it. Each
figure is a rate over its own window: NVML's utilisation and power over the telemetry window,
GPM's over the two GPM samples that bracket it (6-12 ms wider here, more on a loaded host),
so GPM's figures are taken apart over the GPM windows' seconds; mixing the two clocks read the
steps' DRAM activity 2 points low on a quiet machine (19.5 % against 21.4 %, the flushes 74 % of
the window) and 10 points low on a busy one. The result says so; where the flushes took nearly
all the window the figures are n/a (what is left is the counters' noise).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from typing import Any

FLUSH_WINDOW_S = 1.2
MIN_STEP_SHARE = 0.05  # below this share of the window left to the steps, their figures are n/a
RATE_KEYS = ("util_mean_percent", "power_mean_w")
ACTIVITY_SKIP = ("window_s", "window_unsure_s", "source", "reason")


def flush_window(
    telemetry: Any,
    device: str,
    flush: Callable[[], object],
    own_pids: Collection[int],
    cancelled: Callable[[], bool],
) -> tuple[dict[str, Any], int] | None:
    """The telemetry of a window of flushes alone, and how many ran; None when cancelled."""
    # as runner.measure.begin_window opens one (a window written before own_pids existed)
    token = telemetry.begin(device, own_pids=own_pids) if own_pids else telemetry.begin(device)
    n = 0
    t0 = time.perf_counter()
    try:
        while (time.perf_counter() - t0 < FLUSH_WINDOW_S or n == 0) and not cancelled():
            flush()
            n += 1
    finally:
        window = telemetry.end(token)
    return None if cancelled() else (window, n)


def without_flushes(
    gpu: dict[str, Any],
    seconds: float,
    flushes: tuple[int, float],
    alone: dict[str, Any],
    alone_s: float,
    alone_n: int,
) -> str:
    """Take `flushes` (how many, and the host's seconds in them) out of `gpu` (a telemetry
    window's device figures over `seconds`), from `alone` (a window of `alone_n` flushes over
    `alone_s`): the flushes' counts are theirs alone, the steps' time the window's less the
    flushes' own. Changes `gpu`; returns what was done, in words."""
    count, spent = flushes
    if count <= 0 or alone_n <= 0 or alone_s <= 0 or seconds <= 0:
        return ""
    what = (
        f"the {count} cold-cache flushes taken out (one flush measured apart: "
        f"{alone_s / alone_n * 1e3:.2f} ms, from {alone_n} flushes alone)"
    )
    if seconds - min(max(spent, 0.0), seconds) < MIN_STEP_SHARE * seconds:
        _all_na(gpu)
        return f"n/a: the cold-cache flushes took {min(max(spent, 0.0), seconds) / seconds:.0%} of the timed window"
    for key in RATE_KEYS:
        if gpu.get(key) is not None:
            gpu[key] = steps_only(
                gpu[key], alone.get(key), (seconds, alone_s), (count, spent, alone_n),
                100.0 if "percent" in key else None,
            )  # fmt: skip
    if gpu.get("energy_j") is not None and alone.get("energy_j") is not None:
        gpu["energy_j"] = max(0.0, gpu["energy_j"] - alone["energy_j"] / alone_n * count)
    _activity(gpu, alone.get("activity"), (count, spent, alone_n))
    gpu["flush_removed"] = what
    return what


def steps_only(
    whole: Any,
    flushing: Any,
    windows: tuple[float, float],
    flushes: tuple[int, float, int],
    bound: float | None,
) -> float | None:
    """One rate of the steps alone: `whole` over a window of `windows[0]` seconds, `flushing`
    over a window of `flushes[2]` flushes alone lasting `windows[1]` seconds (each rate over its
    own clock's window); `flushes[:2]` how many flushes the timed window held and the host's
    seconds in them."""
    if not isinstance(whole, int | float) or not isinstance(flushing, int | float):
        return None
    seconds, alone_s = windows
    count, spent, alone_n = flushes
    steps_s = seconds - min(max(spent, 0.0), seconds)
    if steps_s < MIN_STEP_SHARE * seconds or alone_s <= 0 or alone_n <= 0:
        return None
    value = max(0.0, (whole * seconds - flushing * alone_s / alone_n * count) / steps_s)
    return min(bound, value) if bound is not None else value


def _all_na(gpu: dict[str, Any]) -> None:
    """The flushes took nearly all the window: what is left of it is the counters' noise."""
    for key in RATE_KEYS:
        gpu[key] = None
    if "energy_j" in gpu:
        gpu["energy_j"] = None
    activity = gpu.get("activity")
    if isinstance(activity, dict) and not activity.get("reason"):
        gpu["activity"] = {
            "reason": "GPM n/a: the cold-cache flushes took nearly all the timed window",
            "window_s": activity.get("window_s"),
        }


def _activity(gpu: dict[str, Any], flushing: Any, flushes: tuple[int, float, int]) -> None:
    """GPM's figures of the steps alone, from the window's and the flushes' own, each over its
    own pair of GPM samples."""
    activity = gpu.get("activity")
    if not isinstance(activity, dict) or activity.get("reason"):
        return
    seconds = _seconds(activity.get("window_s"))
    alone_s = _seconds(flushing.get("window_s")) if isinstance(flushing, dict) else None
    if not isinstance(flushing, dict) or flushing.get("reason") or seconds is None or alone_s is None:
        gpu["activity"] = {  # no activity of the flushes alone to take out: the window's is not the steps'
            "reason": "GPM n/a: the cold-cache flushes' own activity could not be measured apart",
            "window_s": activity.get("window_s"),
        }
        return
    unsure = _seconds(activity.get("window_unsure_s")) or _seconds(flushing.get("window_unsure_s"))
    if unsure:
        gpu["activity"] = {  # the rates stand; the counts the flushes are taken out of do not
            "reason": f"GPM n/a: the host was held up {unsure * 1000:.0f} ms while taking a GPM sample, so "
            "the window the cold-cache flushes are taken out of is not known well enough (a busy CPU)",
            "window_s": activity.get("window_s"),
        }
        return
    for key, value in list(activity.items()):
        if key not in ACTIVITY_SKIP and value is not None:
            activity[key] = steps_only(
                value, flushing.get(key), (seconds, alone_s), flushes,
                None if key.endswith("_mibs") else 100.0,
            )  # fmt: skip


def _seconds(value: Any) -> float | None:
    """A window's length as a positive finite float, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None
