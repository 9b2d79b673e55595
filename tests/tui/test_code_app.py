"""A user's code file in the real app: opened as a scenario, shown in the Code view, reloaded on save."""

from __future__ import annotations

import textwrap
import time

from rich.console import Console

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.widgets import CodeView
from tests.tui_helpers import tiny_scenarios, wait_until

GOOD = """
'''Square roots plus one.'''
TITLE = "My sqrt"

def inputs(rng, n=2000):
    return (rng.random(n),)

def step(xp, x):
    return xp.sqrt(x) + 1.0
"""


def code_text(app) -> str:
    console = Console(width=200, record=True, color_system=None)
    for pane in ("#code-left", "#code-right"):
        console.print(app.query_one(CodeView).query_one(pane).content)
    return console.export_text()


def rewrite(path, text: str) -> None:
    time.sleep(0.05)  # a new mtime even on coarse clocks
    path.write_text(textwrap.dedent(text))


async def test_code_file_opens_first_reloads_on_save_and_keeps_the_last_good_result(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(GOOD))
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], code_files=[path], budget_s=0.1, telemetry=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None, timeout=60)
        first = app.session.live_result
        assert first.status == "ok" and first.spec.workload.startswith("code:")
        assert first.check_ok
        await pilot.press("3")
        await pilot.pause()
        assert "xp.sqrt(x) + 1.0" in code_text(app)

        rewrite(path, GOOD.replace("xp.sqrt(x) + 1.0", "xp.sqrt(x) + undefined_name"))
        await wait_until(pilot, lambda: "NameError" in code_text(app), timeout=30)
        assert "mine.py" in code_text(app) and "line" in code_text(app)
        assert app.session.live_result is first, "the last good result stays shown"
        assert app.is_running

        rewrite(path, GOOD.replace("def step(xp, x):", "def step(xp, x:"))  # a syntax error
        await wait_until(
            pilot, lambda: "SyntaxError" in code_text(app) or "syntax" in code_text(app), timeout=30
        )

        rewrite(path, GOOD.replace("+ 1.0", "+ 2.0"))
        await wait_until(
            pilot,
            lambda: app.session.live_result not in (None, first) and app.session.live_result.status == "ok",
            timeout=60,
        )
        assert "xp.sqrt(x) + 2.0" in code_text(app)


async def test_a_file_broken_at_start_up_is_picked_up_once_fixed(tmp_path, monkeypatch):
    """`--code hot.py` with a syntax error: the app starts and warns; once the file is fixed and
    saved, it joins the scenario list (the watcher kept watching it) and can be measured."""
    from tests.tui_helpers import record_notifications

    path = tmp_path / "hot.py"
    path.write_text(textwrap.dedent(GOOD.replace("def step(xp, x):", "def step(xp, x:")))
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], code_files=[path], budget_s=0.1, telemetry=False,
                     autostart=False)  # fmt: skip
    seen = record_notifications(app, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert any("hot.py" in m for m in seen)  # the start-up warning names the file
        assert "hot" not in app.scenario_set.scenarios
        rewrite(path, GOOD)
        await wait_until(pilot, lambda: "hot" in app.scenario_set.scenarios, timeout=30)
        from textual.widgets import OptionList

        scenarios = app.query_one("#scenarios", OptionList)
        assert scenarios.get_option_index("hot") == 0  # the user's file first, as at start-up
        assert any("hot.py" in m and "loaded" in m for m in seen)
        app.query_one("Sidebar").highlight("hot")
        await wait_until(pilot, lambda: app.session.live_result is not None
                         and app.session.live_result.spec.workload.startswith("code:"), timeout=60)  # fmt: skip
        assert app.session.live_result.status == "ok", app.session.live_result.message
