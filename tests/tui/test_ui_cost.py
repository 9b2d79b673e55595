"""The idle playground's own cost: telemetry is sampled and redrawn slowly when nothing runs.

Every redraw rewrites a widget's whole region on the terminal (a chart is ~20 KB of escape
sequences), so the redraw rate is what costs CPU and bandwidth; benchmarks/ui_idle_cost.py
measures both on the real app.
"""

from __future__ import annotations

import asyncio

from gpuplay.core.measure.telemetry import HostSnapshot, Sampler, Snapshot
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.messages import TelemetryTick
from gpuplay.tui.viewmodels import telemetry_pace
from gpuplay.tui.widgets import Pacer, TelemetryChart, TelemetryPanel
from tests.tui_helpers import tiny_scenarios, wait_until


def _snap(t: float) -> Snapshot:
    return Snapshot(t, t, HostSnapshot([10.0 + t % 7, 20.0], 6 * 2**30, 24 * 2**30, 512 * 2**20), [])


def test_pacer_redraws_at_once_for_a_new_view_and_then_at_most_once_per_period():
    p = Pacer()
    assert p.due("cpu", 10.0)
    assert not p.due("cpu", 10.0)
    assert p.due("cuda:0", 10.0)  # what is shown changed: at once
    assert p.due("cuda:0", 0.0)  # no period: every time


def test_idle_pace_is_slow_and_a_measurement_shows_every_sample():
    class Session:
        phase = "done"
        baseline_running = False

    idle = telemetry_pace(Session(), 0.5)  # type: ignore[arg-type]
    assert idle.sample_s >= 1.0 and idle.panel_s >= 2.0 and idle.chart_s >= 10.0
    Session.phase = "timed"
    busy = telemetry_pace(Session(), 0.5)  # type: ignore[arg-type]
    assert busy.sample_s == 0.5 and busy.panel_s == 0.0 and busy.chart_s <= 1.0


async def test_idle_ticks_do_not_redraw_the_telemetry_column(tmp_path):
    """At 160 columns (the telemetry column shown), ten idle ticks redraw the chart at most once."""
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None and app.session.phase == "done")
        chart = app.query_one("#tchart-side", TelemetryChart)
        panel = app.query_one("#telemetry-side", TelemetryPanel)
        app.telemetry.sampler = Sampler(0.5)  # never started: the test hands it the snapshots
        history = app.telemetry.sampler.history
        drawn, shown = chart._version, []
        real_update = panel.update
        panel.update = lambda *a, **k: (shown.append(1), real_update(*a, **k))  # type: ignore[method-assign]
        for i in range(10):
            history.append(_snap(float(i)))
            app.post_message(TelemetryTick(history[-1]))
            await asyncio.sleep(0.05)
        await pilot.pause()
        assert chart._version - drawn <= 1
        assert len(shown) <= 1
        assert app.telemetry.sampler.interval >= 1.0  # idle: sampled at 1 Hz
        await pilot.press("4")  # a view being shown draws at once, whatever the pace
        await pilot.pause()
        full = app.query_one("#tchart-full", TelemetryChart)
        assert full._data_key[0] == len(history)
