"""The playground over hostile text: a title of `[/]` and terminal escapes, a bad file whose field
name is markup, a failing run's message from user code. Nothing crashes; a crash exits non-zero."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from gpuplay.tui import app as app_module
from gpuplay.tui.app import GpuPlayApp
from tests.tui_helpers import tiny_scenarios, wait_until

HOSTILE = "[/]\x1b[31mRED [bold"


def hostile_folder(tmp_path):
    folder = tiny_scenarios(tmp_path / "sc")
    (folder / "markup.toml").write_text(
        'name = "markup"\nworkload = "elementwise"\ntitle = "[/]\\u001b[31mRED [bold"\n'
        '[params]\nn = 1000\n[claim]\nsource = "[/]"\ntext = "claim [/] \\u001b[2J"\nflaws = ["[bold"]\n'
    )
    (folder / "badfield.toml").write_text('"[/]x" = 1\nname = "x"\nworkload = "matmul"\n')
    return folder


async def test_markup_in_titles_claims_and_errors_is_text(tmp_path):
    app = GpuPlayApp([hostile_folder(tmp_path)], budget_s=0.05, telemetry=False, export_dir=tmp_path / "out")
    async with app.run_test(size=(140, 40)) as pilot:
        options = app.query_one("#scenarios", OptionList)
        index = next(i for i in range(options.option_count) if options.get_option_at_index(i).id == "markup")
        options.highlighted = index
        await pilot.pause()
        await wait_until(
            pilot,
            lambda: app.session.live_result is not None and app.session.live_result.spec.scenario == "markup",
        )
        await pilot.pause(0.3)
        prompt = str(options.get_option_at_index(index).prompt)
        assert prompt == "[/]␛[31mRED [bold"
        claim = str(app.query_one("#claim").render())
        assert "claim [/] ␛[2J" in claim
    assert app.return_code in (None, 0)


def test_a_crashed_app_exits_non_zero(monkeypatch):
    def crash(self, *a, **kw):
        self._return_code = 1  # what Textual records after printing an unhandled exception

    monkeypatch.setattr(GpuPlayApp, "run", crash)
    with pytest.raises(SystemExit) as exit_:
        app_module.run_app([])
    assert exit_.value.code == 1


async def test_the_sweep_charts_title_shows_a_titles_escapes(tmp_path):
    # The Sweep tab's chart title is the scenario's title: plotext would obey its ESC bytes (a
    # colour change, a terminal title) unless they are shown as text first.
    from gpuplay.tui.sweep_view import SweepChart

    app = GpuPlayApp([hostile_folder(tmp_path)], budget_s=0.05, telemetry=False, export_dir=tmp_path / "out")
    async with app.run_test(size=(140, 40)) as pilot:
        options = app.query_one("#scenarios", OptionList)
        options.highlighted = next(
            i for i in range(options.option_count) if options.get_option_at_index(i).id == "markup"
        )
        await pilot.pause()
        await pilot.press("7")
        chart = app.query_one(SweepChart)
        await wait_until(pilot, lambda: "RED" in str(chart.render()))
        assert "[/]␛[31mRED [bold" in str(chart.render())
