"""The Sweep tab: a real (tiny) sweep in a child command, drawn point by point, crossovers and fits shown."""

from __future__ import annotations

import pytest

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.sweep_view import SweepChart, SweepView, live_crossovers, reference_of
from tests.tui_helpers import record_notifications, tiny_scenarios, wait_until

pytestmark = pytest.mark.slow


async def test_enter_sweeps_and_draws_each_configuration_against_size(tmp_path, monkeypatch):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        await pilot.press("7")
        assert app.main.query_one("TabbedContent").active == "sweep"
        view = app.main.query_one(SweepView)
        assert view.scenario is not None and view.scenario.name == "matmul" and view.param == "n"
        assert view.over == "n=4..128"  # a 16th of the tiny preset's 64 to twice it
        await pilot.press("left_square_bracket", "full_stop", "full_stop")
        assert view.over == "n=16..64"
        view.budget_s, view.backends = 0.01, "numpy,torch"
        seen_growing = []
        real_line = view._line

        def line(text, gen):
            real_line(text, gen)
            seen_growing.append(sum(len(v) for v in view.series.values()))

        monkeypatch.setattr(view, "_line", line)
        await pilot.press("enter")
        assert view.running
        await wait_until(pilot, lambda: not view.running, timeout=180)
        assert not view.error, (view.error, view.notes)
        # points arrived one by one, before the command ended
        assert {1, 2, 3, 4, 5, 6} <= set(seen_growing)
        doc = view.doc
        assert doc is not None and doc["values"] == [16, 32, 64]
        assert set(view.series) == {"numpy cpu float32", "torch cpu float32"}
        assert all(len(points) == 3 for points in view.series.values())
        (c,) = doc["crossovers"]
        notes = str(app.main.query_one("#sweep-notes").content)
        assert c["reason"] in notes and "floor" in notes
        chart = app.main.query_one(SweepChart)
        assert chart._data_key is not None and "time per step" in chart._data_key[0]
        await pilot.press("v")
        assert view.speedup and "speedup over NumPy CPU" in chart._data_key[0]


async def test_stop_keeps_the_finished_points(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        await pilot.press("7")
        view = app.main.query_one(SweepView)
        view.budget_s, view.backends = 0.3, "numpy"
        await pilot.press("enter")
        await wait_until(pilot, lambda: sum(len(v) for v in view.series.values()) >= 2, timeout=120)
        await pilot.press("enter")  # stop
        await wait_until(pilot, lambda: not view.running, timeout=60)
        assert not view.error, view.error
        assert view.doc is not None and view.doc["interrupted"] is True
        assert 2 <= len(view.series["numpy cpu float32"]) < len(view.doc["values"])
        assert "stopped" in str(app.main.query_one("#sweep-status").content)


async def test_a_failing_sweep_is_a_message_and_the_app_goes_on(tmp_path, monkeypatch):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        messages = record_notifications(app, monkeypatch)
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        await pilot.press("7")
        view = app.main.query_one(SweepView)
        view.backends = "cupy"  # no GPU here: every configuration refused
        await pilot.press("enter")
        await wait_until(pilot, lambda: not view.running, timeout=120)
        assert "nothing to sweep" in view.error
        assert any("nothing to sweep" in m for m in messages)
        assert any("refused cupy" in n for n in view.notes)
        await pilot.press("1")
        assert app.is_running


async def test_the_commands_other_lines_are_shown_escaped(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.05, telemetry=False, autostart=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("7")
        view = app.main.query_one(SweepView)
        view._line("[red]warning[/] \x1b[31mred\x1b[0m", view._gen)
        await pilot.pause()
        notes = app.main.query_one("#sweep-notes").render()
        assert "[red]warning[/] [31mred[0m" in str(notes) and "\x1b" not in str(notes)


def test_live_crossovers_and_references():
    labels = ["numpy cpu float32", "numpy cpu float64", "torch cpu float32"]
    assert reference_of(labels, "torch cpu float32") == "numpy cpu float32"
    assert reference_of(labels, "numpy cpu float64") == "numpy cpu float32"
    assert reference_of(labels, "numpy cpu float32") is None
    pts = lambda ts: [{"value": v, "median": t, "status": "ok"} for v, t in zip((16, 32, 64), ts)]  # noqa: E731
    (c,) = live_crossovers("n", {"numpy cpu float32": pts([1, 2, 8]), "torch cpu float32": pts([4, 4, 4])})
    assert c["faster"] == "torch cpu float32" and 32 < c["at"] < 64


NO_PRESETS = (
    'PARAMS = {"n": 64}\n'
    "def inputs(rng, n):\n    return rng.random(n)\n"
    "def step(xp, x):\n    return x * 2.0\n"
    "def flops(n):\n    return float(n)\n"
)


async def test_the_sweep_tab_sweeps_a_code_file_without_presets(tmp_path):
    from gpuplay.tui.sweep_view import SweepView

    path = tmp_path / "double.py"
    path.write_text(NO_PRESETS)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], code_files=[path], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        assert app.session.live_result.spec.workload.startswith("code:")  # the file opens first
        await pilot.press("7")
        view = app.main.query_one(SweepView)
        assert view.scenario is not None and view.scenario.name == "double" and view.param == "n"
        view.budget_s, view.backends, view.low, view.high = 0.01, "numpy", 64, 128
        await pilot.press("enter")
        await wait_until(pilot, lambda: not view.running, timeout=120)
        assert not view.error, (view.error, view.notes)
        assert view.doc is not None and view.doc["values"] == [64, 128]  # n=64..128: two sizes
