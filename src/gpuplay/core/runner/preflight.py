"""Before committing to a run: will the data fit, and how long will one step take?"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuplay.core.backends.base import StepTimer
from gpuplay.core.runner.inputs import host_dtype
from gpuplay.core.runner.loop import Cancelled
from gpuplay.core.runner.plan import RunPlan
from gpuplay.core.runner.steps import build_step
from gpuplay.core.workloads.base import ITEMSIZE

GIB = 2**30


def memory_shortfall(plan: RunPlan) -> str:
    """Why the data cannot fit (host float64 inputs and reference, device copies), or ''."""
    spec, w = plan.spec, plan.workload
    elements = w.footprint_elements(plan.params)
    host_need = elements * 8 * 2  # float64 inputs and the float64 reference
    device_need = elements * ITEMSIZE[spec.dtype] * 2  # device inputs and outputs, with slack
    if spec.device == "cpu":
        host_need += device_need
    available = host_memory_available()
    if available is not None and host_need > available:
        return (
            f"needs ~{host_need / GIB:.1f} GiB of host memory at {plan.size}, "
            f"{available / GIB:.1f} GiB available: choose a smaller size"
        )
    free = plan.backend.device_memory_free(spec.device) if spec.device != "cpu" else None
    if free is not None and device_need > free:
        return (
            f"needs ~{device_need / GIB:.1f} GiB on {spec.device}, {free / GIB:.1f} GiB free: "
            "choose a smaller size"
        )
    return ""


def host_memory_available() -> int | None:
    """Bytes of host memory available now; None without psutil where /proc/meminfo does not say
    (the host check is then skipped)."""
    available = _proc_memory_available()
    if available is not None:
        return available
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def _proc_memory_available() -> int | None:
    """psutil.virtual_memory().available as psutil 7's _pslinux.virtual_memory gives it where the
    kernel reports MemAvailable (3.14 and later) above 0, without importing psutil (~7-14 ms of a
    NumPy run's engine): that figure in bytes; 0 below 0; MemFree above MemTotal
    (a container's distorted figures). None elsewhere: psutil answers (and estimates)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        mems = {}
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                fields = line.split()
                if fields[0] in (b"MemTotal:", b"MemFree:", b"MemAvailable:"):
                    mems[fields[0]] = int(fields[1]) * 1024
        total, free, avail = mems[b"MemTotal:"], mems[b"MemFree:"], mems[b"MemAvailable:"]
    except (OSError, ValueError, IndexError, KeyError):
        return None
    if avail == 0:
        return None  # psutil estimates it (a kernel bug, psutil issue 1915)
    return 0 if avail < 0 else free if avail > total else avail


def _fastest_repeat(step: Callable[[], Any], timer: StepTimer, budget_s: float, most: int = 5) -> float:
    """The fastest of a few calls, as many as fit `budget_s` (at least one).

    A probe is a small fraction of the step and its time is multiplied up to full size: one
    call that a busy machine's scheduler stalls for 30 ms turned a 1.5 s NumPy FFT into a
    13.5 s estimate and refused it. The fastest of a few is the probe's own cost.
    """
    best, spent = math.inf, 0.0
    for _ in range(most):
        dt = timer(step)[0]
        best, spent = min(best, dt), spent + dt
        if spent >= budget_s:
            break
    return best


def estimate_step_seconds(plan: RunPlan, timer: StepTimer, limit_s: float, cancel: threading.Event) -> float:
    """Time the workload at growing fractions of its size and extrapolate with a floor + rate model.

    A step costs a fixed floor (launches, Python, dispatch) plus its work at some rate:
    t = floor + work / rate. Two probe sizes fix both; extrapolating one probe linearly
    instead turns a launch-bound 20 µs at 1/4096 of the FLOPs (a matmul at 1/16 of its
    size) into 80 ms. Doubling the probe until it costs a noticeable fraction of the limit
    catches costs that grow faster than FLOPs (half precision emulated on a CPU falls out of
    cache): the rate comes from the two largest probes, at a total probe cost of about
    limit/4 at most.
    """
    spec, backend = plan.spec, plan.backend
    full = plan.work
    points: list[tuple[float, float]] = []  # (work, seconds) of each probe
    for factor in (1 / 16, 1 / 8, 1 / 4, 1 / 2):
        if cancel.is_set():
            raise Cancelled
        probe = plan.scaled(factor)
        work = probe.work
        if work >= full or work <= 0 or (points and work <= points[-1][0]):
            break
        probe_inputs = probe.workload.inputs(probe.params, np.random.default_rng(spec.seed))
        args = tuple(backend.from_host(a, spec.device, spec.dtype) for a in probe_inputs)
        args = probe.workload.prepare(backend.name, spec.device, args, probe.params)
        # The configuration that will run: its dtype, AMP and levers (backend.configured, around
        # this call), and its uploads and downloads where they are timed.
        hosts = (
            tuple(np.ascontiguousarray(a, dtype=host_dtype(spec.dtype)) for a in probe_inputs)
            if probe.timed_transfers
            else None
        )
        del probe_inputs
        step = build_step(probe, args, hosts, compiled=False)
        del hosts
        t = first = timer(step)[0]  # the output is dropped at once
        if first < limit_s / 8:
            t = _fastest_repeat(step, timer, limit_s / 100)  # the first call pays one-off costs
        points.append((work, t))
        del args, step
        estimate = extrapolate(points, full)
        if len(points) >= 2 and estimate < limit_s / 4:
            break
        if t > limit_s / 16:
            break
    return extrapolate(points, full)


def extrapolate(points: list[tuple[float, float]], full: float) -> float:
    """The cost at `full` work from (work, seconds) probes: floor + work / rate.

    The rate is the slope through the two largest probes (never negative: timer noise on
    tiny steps); the floor is what the larger probe's time leaves. With one probe there is
    no slope to fit, and proportional scaling is the only (pessimistic) guess.
    """
    if not points:
        return 0.0
    w1, t1 = points[-1]
    if len(points) == 1:
        return t1 * full / w1
    w0, t0 = points[-2]
    slope = max(0.0, (t1 - t0) / (w1 - w0)) if w1 > w0 else 0.0
    floor = max(0.0, t1 - slope * w1)
    return max(t1, floor + slope * full)
