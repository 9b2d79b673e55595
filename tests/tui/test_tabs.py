"""The tabs as widgets: each draws itself without running the planner, and owns its workers."""

from __future__ import annotations

import functools
import inspect
import io
import sys

import pytest
from rich.console import Console

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.tabs import TAB_IDS, draw_visible_telemetry
from tests.tui_helpers import tiny_scenarios, wait_until


def screen_text(app) -> str:
    console = Console(width=app.size.width, height=app.size.height, record=True, file=io.StringIO())
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def planner_calls(draw) -> list[str]:
    """The planner functions that `draw()` called, directly or not: for the call, every planner
    function is replaced, in the planner and in each loaded gpuplay module that imported it by
    name, by one that records its name.

    Not a profiler (sys.setprofile, cProfile): a signal delivered to a worker while one was set
    left Python 3.11 re-entering the first line of the drawn method for as long as the run lasted
    (seen twice in two-worker runs; the serial suite never profiled across a signal)."""
    from gpuplay.core.catalogue import planner

    calls: list[str] = []
    ours = {
        id(f): f
        for f in vars(planner).values()
        if callable(f)
        and inspect.isfunction(inspect.unwrap(f))
        and inspect.unwrap(f).__module__ == planner.__name__
    }

    def recording(f):
        @functools.wraps(f)
        def record(*args, **kwargs):
            calls.append(f.__name__)
            return f(*args, **kwargs)

        return record

    with pytest.MonkeyPatch.context() as mp:
        for name, module in list(sys.modules.items()):
            if module is None or not (name == "gpuplay" or name.startswith("gpuplay.")):
                continue
            for attr, value in list(vars(module).items()):
                if id(value) in ours and ours[id(value)] is value:
                    mp.setattr(module, attr, recording(value))
        draw()
    return calls


async def test_drawing_a_tab_never_runs_the_planner(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        for tab_id in TAB_IDS:
            await pilot.press(str(TAB_IDS.index(tab_id) + 1))
            await pilot.pause()
            tab = app.tab(tab_id)
            assert tab.shown
            assert planner_calls(tab.refresh_view) == [], tab_id
        assert planner_calls(lambda: draw_visible_telemetry(app.main)) == []


async def test_the_profile_tab_asks_the_engine_once_and_shows_the_answer(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(
            pilot, lambda: app.session.live_result is not None and app.session.phase == "done", 60
        )
        asked = []
        real_profile = app.engine.profile
        app.engine.profile = lambda spec, steps: (asked.append(spec), real_profile(spec, steps=steps))[1]
        tab = app.tab("profile")
        await pilot.press("5")
        await wait_until(pilot, lambda: tab.profile is not None, timeout=60)
        assert asked == [app.spec]
        assert f"Profile {app.spec.label()}" in screen_text(app)
        await pilot.press("1")
        await pilot.press("5")  # shown again: the profile is kept, not asked for again
        await pilot.pause()
        assert asked == [app.spec] and tab.profile is not None
