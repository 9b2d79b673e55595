"""The Tune tab: key 8 shows it, enter climbs the ladder on the chosen scenario in the app's engine,
each rung appears as it is decided, and enter again stops it keeping the finished rungs."""

from __future__ import annotations

import pytest

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.tabs import TAB_IDS
from gpuplay.tui.tabs.tune import TuneTab
from tests.tui_helpers import tiny_scenarios, wait_until


@pytest.mark.slow
async def test_the_tune_tab_climbs_the_ladder_and_stops_on_enter(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed and app.session.scenario is not None, timeout=60)
        await pilot.press(str(TAB_IDS.index("tune") + 1))
        await pilot.pause()
        tab = app.tab("tune")
        assert isinstance(tab, TuneTab) and tab.shown
        tab.budget_s = 15.0
        # the palette's entry starts it, as enter does (enter stops it below)
        from gpuplay.tui.commands import GpuplayCommands, _tune

        entries = [text for text, _cb, _help in GpuplayCommands.commands(type("P", (), {"app": app})())]
        assert "tune: climb the levers ladder on this scenario" in entries and "show tune" in entries
        _tune(app)
        await wait_until(
            pilot, lambda: tab.ladder is not None and tab.ladder.rungs[1].status != "pending", 120
        )
        await pilot.press("enter")  # stop: the finished rungs stay
        await wait_until(pilot, lambda: not tab.running, 120)
        ladder = tab.ladder
        assert ladder.baseline.status == "measured"
        assert ladder.rungs[1].status in ("measured", "dropped")
        assert ladder.interrupted or all(r.status != "pending" for r in ladder.rungs)
        refused = [r for r in ladder.rungs if r.status == "refused"]
        assert refused and all(r.reason for r in refused)  # the GPU rungs, with their reasons
        text = str(tab.query_one("#tune-status").render())
        assert "kept" in text and "enter: climb again" in text


async def test_a_ladder_longer_than_the_screen_scrolls_from_the_keyboard(tmp_path):
    """At 80×24 about four rungs fit; the rest (and the chart) could be reached with a mouse only."""
    from gpuplay.core.catalogue.scenarios import spec_for
    from gpuplay.core.studies import tune

    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, autostart=False, telemetry=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.probed and app.session.scenario is not None)
        await pilot.press(str(TAB_IDS.index("tune") + 1))
        await pilot.pause()
        tab = app.tab("tune")
        sc = app.session.scenario
        tab.ladder = tune.plan_ladder(spec_for(sc, "quick")[0], "cpu", sc.name, 60.0)
        tab.refresh_view()
        await pilot.pause()
        view = tab.query_one("#tune-view")
        assert app.focused is view and view.max_scroll_y > 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert view.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert view.scroll_y == view.max_scroll_y
