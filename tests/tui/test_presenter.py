"""The presenter view through Textual's Pilot: navigation, live figures, replay labels, fallbacks."""

from __future__ import annotations

import os

import pytest
from gpuplay.tui.bignumber import BigNumber

from gpuplay.core.decks import load_recording, parse_deck, recording_json
from gpuplay.core.result import RunResult
from gpuplay.core.scenarios import load_scenarios
from gpuplay.tui import presenter
from gpuplay.tui.presenter import PresenterApp, Staircase
from tests.tui_helpers import tiny_scenarios, wait_until

DECK = """
title = "tiny deck"
preset = "quick"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "NumPy matmul"
scenario = "matmul"
caption = "the baseline caption"
notes = "say the baseline"
[[steps]]
title = "torch matmul"
scenario = "matmul"
backend = "torch"
caption = "torch caption"
[[steps]]
title = "on a GPU that is not here"
scenario = "matmul"
backend = "torch"
device = "cuda:9"
caption = "the device"
{recorded}
"""
RECORDED = """[steps.recorded]
median_ms = 0.5
speedup = 42
device = "Big GPU"
source = "a rehearsal elsewhere"
"""


@pytest.fixture
def scenarios(tmp_path):
    return load_scenarios([tiny_scenarios(tmp_path / "sc")])


def deck_of(scenarios, recorded: str = RECORDED):
    return parse_deck(DECK.replace("{recorded}", recorded), scenarios, "tiny.toml")


def text(app, selector: str) -> str:
    """What a Static shows, as plain text (tables included)."""
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(app.query_one(selector).content)
    return console.export_text()


async def test_next_previous_and_live_staircase(scenarios):
    app = PresenterApp(deck_of(scenarios))
    async with app.run_test(size=(100, 30)) as pilot:
        assert "step 1 of 3" in text(app, "#deck-bar") and "live on " in text(app, "#deck-bar")
        assert "the baseline caption" in text(app, "#caption")
        await wait_until(pilot, lambda: app.deck.steps[0].spec in app.measured)
        assert app.query_one("#speedup", BigNumber).value == "1x"  # NumPy is its own baseline
        await pilot.press("left")  # already first: stays
        assert app.index == 0
        await pilot.press("space")
        assert app.index == 1 and "torch caption" in text(app, "#caption")
        await wait_until(pilot, lambda: app.deck.steps[1].spec in app.measured)
        digits = app.query_one("#speedup", BigNumber).value
        assert digits.endswith("x") and digits != "-"
        rows = app.query_one(Staircase).rows
        assert [r[0] for r in rows] == ["NumPy matmul", "torch matmul"]
        assert all(fig is not None and fig.median for _, fig, _ in rows)
        await pilot.press("left")
        assert app.index == 0 and "the baseline caption" in text(app, "#caption")
        assert len(app.query_one(Staircase).rows) == 1
        await pilot.press("right", "right")
        assert app.index == 2
        await pilot.press("right")  # already last: stays
        assert app.index == 2


async def test_unavailable_step_falls_back_to_recorded_figure_and_says_so(scenarios):
    app = PresenterApp(deck_of(scenarios))
    async with app.run_test(size=(100, 30)) as pilot:
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        detail = text(app, "#detail")
        assert "refused here" in detail and "showing the recorded figure: Big GPU" in detail
        assert "RECORDED FIGURE, not measured here" in text(app, "#speedup-note")
        assert app.query_one("#speedup", BigNumber).value == "42x"
        assert app.query_one("#speedup").has_class("fallback")


async def test_unavailable_step_without_recorded_figure(scenarios):
    app = PresenterApp(deck_of(scenarios, recorded=""))
    async with app.run_test(size=(100, 30)) as pilot:
        app.index = 2
        app.show_step()
        await wait_until(pilot, lambda: app.deck.steps[2].spec in app.failed)
        assert "no recorded figure for this step" in text(app, "#detail")
        assert app.query_one("#speedup", BigNumber).value == "-"


async def test_replay_labels_every_figure_and_measures_nothing(scenarios, tmp_path, monkeypatch):
    deck = deck_of(scenarios, recorded="")
    base, torch_cpu, gpu = (s.spec for s in deck.steps)
    results = [
        RunResult(base, samples=[0.020] * 5, size="64×64", conditions={"device_name": "CPU"}),
        RunResult(torch_cpu, samples=[0.010] * 5, size="64×64"),
        RunResult(gpu, samples=[0.001] * 5, size="64×64", conditions={"device_name": "Recorded GPU 9000"}),
    ]
    path = tmp_path / "rec.json"
    path.write_text(recording_json(deck, results))

    def must_not_measure(*a, **k):
        raise AssertionError("replay must not measure")

    monkeypatch.setattr(presenter, "measure", must_not_measure)
    rec = load_recording(path)
    app = PresenterApp(deck, replay=rec, theme="projector")
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "projector"
        bar = text(app, "#deck-bar")
        assert f"recorded on Recorded GPU 9000, {rec.date}" in bar
        await pilot.press("right")
        assert app.query_one("#speedup", BigNumber).value == "2x"
        assert "recorded · Recorded GPU 9000" in text(app, "#speedup-note")
        await pilot.press("right")
        assert app.query_one("#speedup", BigNumber).value == "20x"
        medians = [fig.median for _, fig, _ in app.query_one(Staircase).rows]
        assert medians == pytest.approx([0.020, 0.010, 0.001])


def test_unknown_theme_is_refused(scenarios):
    with pytest.raises(ValueError, match="unknown theme 'nope'.*projector"):
        PresenterApp(deck_of(scenarios), theme="nope")


def test_fallback_recording_fills_a_step_that_cannot_run_here(scenarios, tmp_path):
    """--fallback FILE: a rehearsal's figure (from a GPU box) stands in, labelled with its origin."""
    from gpuplay.tui.presenter import figure_for

    deck = deck_of(scenarios, recorded="")
    base, _, gpu = (s.spec for s in deck.steps)
    recorded = [
        RunResult(base, samples=[0.030] * 5, size="64×64"),
        RunResult(gpu, samples=[0.003] * 5, size="64×64", conditions={"device_name": "Box GPU"}),
    ]
    path = tmp_path / "gpu-box.json"
    path.write_text(recording_json(deck, recorded))
    rec = load_recording(path)
    refused_here = RunResult(gpu, status="refused", message="no CUDA here")
    fig = figure_for(deck.steps[2], refused_here, None, source="live", fallback=rec)
    assert fig.source == "fallback" and fig.median == pytest.approx(0.003)
    assert fig.speedup == pytest.approx(10.0)  # the recording's own baseline, not this machine's
    assert "refused here: no CUDA here" in fig.detail and "recorded on Box GPU" in fig.detail
