"""The step estimate: a probe's time is multiplied up to full size, so one stalled call must not count."""

from __future__ import annotations

import threading

import pytest

from gpuplay.core.runner import preflight
from gpuplay.core.runner.plan import plan_run
from gpuplay.core.spec import RunSpec


def test_one_stalled_probe_call_does_not_refuse_the_step(monkeypatch):
    plan = plan_run(RunSpec.make("fft2d", {"n": 4096}, max_step_s=10.0))
    calls: list[float] = []
    # Probe 1/16: the one-off first call, a 50 ms scheduler stall, then its real 0.3 ms.
    # Probe 1/8: its work at the same rate. The floor + rate fit through the fastest repeats
    # then extrapolates 0.3 ms per probe-1 work, with no floor.
    grow = plan.scaled(1 / 8).work / plan.scaled(1 / 16).work
    times = iter([0.001, 0.050] + [0.0003] * 4 + [0.002] + [0.0003 * grow] * 5)

    def timer(step):
        calls.append(next(times))
        return calls[-1], None

    monkeypatch.setattr(preflight, "build_step", lambda *a, **k: lambda: None)
    est = preflight.estimate_step_seconds(plan, timer, 10.0, threading.Event())
    ratio = plan.work / plan.scaled(1 / 16).work
    assert est == pytest.approx(0.0003 * ratio)  # the fastest repeat, extrapolated
    assert est < 1.0  # the stall alone, multiplied up, would have been 0.05 × ratio ≈ 19 s: refused
    assert len(calls) <= 12  # a handful of calls per probe, not a benchmark


def test_repeats_stop_at_their_budget():
    slow = iter([0.4, 0.4, 0.4])
    assert preflight._fastest_repeat(lambda: None, lambda s: (next(slow), None), budget_s=0.1) == 0.4
