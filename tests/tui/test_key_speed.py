"""What a key's repaint must not do (issue 34, row 5: key -> repaint p95 <= 50 ms)."""

from __future__ import annotations

import textual.screen
from textual.renderables.background_screen import BackgroundScreen

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.widgets import HelpScreen
from tests.tui_helpers import tiny_scenarios, wait_until


def make_app(tmp_path, **kw) -> GpuPlayApp:
    kw.setdefault("telemetry", False)
    return GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path / "out", budget_s=0.1, **kw)


async def test_the_help_is_opaque_the_main_screen_is_not_painted_under_it(tmp_path, monkeypatch):
    """A translucent modal makes Textual render the whole main screen again and blend it under the
    help at every paint of it; the help is a page of its own, so it never does."""
    blended: list[object] = []

    class Recording(BackgroundScreen):
        def __init__(self, *args, **kw) -> None:
            blended.append(args)
            super().__init__(*args, **kw)

    monkeypatch.setattr(textual.screen, "BackgroundScreen", Recording)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        app.screen.refresh()
        await pilot.pause()
        assert blended == []
        assert app.screen.styles.background.a == 1
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
