"""A deck's sweep step in the presenter: the curve grows live in place of the single figure."""

from __future__ import annotations

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import parse_deck
from gpuplay.tui.presenter import PresenterApp
from gpuplay.tui.sweep_view import SweepChart, SweepView
from tests.tui_helpers import wait_until

pytestmark = pytest.mark.slow

DECK = """
title = "tiny sweep deck"
preset = "quick"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "NumPy matmul"
scenario = "matmul"
params = { n = 32 }
caption = "one figure"
[[steps]]
title = "every size"
scenario = "matmul"
caption = "the sweep caption"
[steps.sweep]
over = "n=16..64"
backends = ["numpy", "torch"]
budget_s = 0.01
[[steps]]
title = "after"
scenario = "matmul"
params = { n = 32 }
caption = "after the sweep"
[[steps]]
title = "another sweep"
scenario = "matmul"
caption = "a second sweep"
[steps.sweep]
over = "n=8,16"
backends = ["numpy"]
budget_s = 0.01
"""


async def test_a_sweep_step_draws_its_curve_and_is_kept_when_revisited():
    deck = parse_deck(DECK, load_scenarios([]))
    app = PresenterApp(deck)
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(SweepView)
        assert not view.display and app.query_one("#middle").display
        await pilot.press("right")
        assert view.display and not app.query_one("#middle").display
        assert view.running and view.over == "n=16..64"
        assert app.focused is not view  # the presenter's keys stay the presenter's
        await pilot.press("n")
        assert app.query_one("#notes").has_class("hidden")
        await wait_until(pilot, lambda: not view.running, timeout=180)
        assert not view.error, (view.error, view.notes)
        assert set(view.series) == {"numpy cpu float32", "torch cpu float32"}
        assert all(len(p) == 3 for p in view.series.values())
        assert view.doc["crossovers"] and app.query_one(SweepChart)._data_key is not None
        assert "swept [b]n=16..64[/] · 6/6 points" in str(app.query_one("#sweep-status").content)
        await pilot.press("right")
        assert not view.display and app.query_one("#middle").display
        await pilot.press("right")  # another sweep step: the view sweeps that one
        assert view.display and view.running and view.over == "n=8,16"
        await wait_until(pilot, lambda: not view.running, timeout=180)
        assert list(view.series) == ["numpy cpu float32"] and len(view.series["numpy cpu float32"]) == 2
        await pilot.press("left", "left")  # back: shown again from what was measured, not re-run
        assert view.display and not view.running and view.over == "n=16..64"
        assert set(view.series) == {"numpy cpu float32", "torch cpu float32"}
        assert all(len(p) == 3 for p in view.series.values())


async def test_a_sweep_that_cannot_start_says_why_and_stops(monkeypatch):
    """Whatever goes wrong before the command runs ends the sweep with its reason shown: never a
    sweep that says it is running for ever (a scenario object without presets did that)."""

    def broken(self, out):
        raise RuntimeError("no [b]such[/b] thing")

    monkeypatch.setattr(SweepView, "command", broken)
    app = PresenterApp(parse_deck(DECK, load_scenarios([])))
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(SweepView)
        await pilot.press("right")
        await wait_until(pilot, lambda: not view.running, timeout=30)
        assert "RuntimeError: no [b]such[/b] thing" in view.error
