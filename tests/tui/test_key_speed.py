"""What a key's repaint must not do (key -> repaint p95 <= 50 ms)."""

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


async def test_a_key_that_starts_a_run_is_painted_before_the_step_chart_is_built_again(tmp_path, monkeypatch):
    """`p` (a new preset: a new run) repaints the controls in a frame that does not wait for the
    step chart's plotext build; the chart, cleared for the new run, is built right after it."""
    import time

    from textual.app import App
    from textual_plotext import PlotextPlot

    from gpuplay.tui.widgets import StepChart

    events: list[tuple[str, float]] = []
    real_render, real_display = PlotextPlot.render, App._display

    def render(self):
        if isinstance(self, StepChart):
            events.append(("build", time.perf_counter()))
        return real_render(self)

    def display(self, screen, renderable):
        if renderable is not None:
            events.append(("frame", time.perf_counter()))
        return real_display(self, screen, renderable)

    monkeypatch.setattr(PlotextPlot, "render", render)
    monkeypatch.setattr(App, "_display", display)
    app = make_app(tmp_path, autostart=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        app.start_measurement()
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.pause(0.3)
        preset = app.session.preset
        events.clear()
        t0 = time.perf_counter()
        await pilot.press("p")
        await wait_until(pilot, lambda: any(e == "build" for e, _ in events))
        assert app.session.preset != preset
        after = [e for e, t in events if t >= t0]
        assert after.index("frame") < after.index("build"), after


async def test_showing_the_live_tab_again_does_not_redraw_its_unchanged_panels(tmp_path, monkeypatch):
    """Back on the Live tab with nothing new, its figures are not updated (each update of a text
    panel lays the tab out again and renders its table twice)."""
    from textual.widgets import Static

    from gpuplay.tui.widgets import ClaimLine, SpeedupDigits, StatsPanel

    updated: list[str] = []
    real = Static.update

    def update(self, *args, **kw):
        if isinstance(self, StatsPanel | SpeedupDigits | ClaimLine):
            updated.append(type(self).__name__)
        return real(self, *args, **kw)

    monkeypatch.setattr(Static, "update", update)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await wait_until(pilot, lambda: app.session.phase == "done" and app.tab("compare").ready)
        await pilot.press("2")
        await pilot.pause(0.2)
        updated.clear()
        await pilot.press("1")
        await pilot.pause(0.2)
        assert updated == []
        app.session.phase = "timed"  # something new is still drawn
        app.refresh_all()
        assert "StatsPanel" in updated


async def test_a_hidden_live_panel_is_drawn_once_at_its_width_when_shown(tmp_path, monkeypatch):
    """Figures handed to the Live panels while their tab is hidden (no width yet) are drawn once,
    when the tab is shown and laid out, not at width 0 and then again at their width."""
    from textual.widgets import Static

    from gpuplay.tui.widgets import SpeedupDigits, StatsPanel

    updated: list[tuple[str, int]] = []
    real = Static.update

    def update(self, *args, **kw):
        if isinstance(self, StatsPanel | SpeedupDigits):
            updated.append((type(self).__name__, self.content_size.width))
        return real(self, *args, **kw)

    monkeypatch.setattr(Static, "update", update)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.phase == "done" and app.tab("compare").ready)
        await pilot.press("2")
        await pilot.pause(0.2)
        live = app.tab("live")
        assert live.query_one(StatsPanel).content_size.width == 0
        updated.clear()
        app.session.phase = "timed"  # new figures while the tab is hidden
        live.refresh_view()
        assert updated == []
        await pilot.press("1")
        await pilot.pause(0.2)
        assert [name for name, _ in updated].count("StatsPanel") == 1, updated
        assert all(width > 0 for _, width in updated), updated


async def test_a_key_that_starts_a_run_draws_only_the_controls_in_its_handler(tmp_path, monkeypatch):
    """`p`: the handler shows the new preset in the controls; the tab on screen (here Compare: its
    table, its charts, the calibration file) is drawn after that frame, and the run starts after."""
    from gpuplay.tui.tabs import CompareTab
    from gpuplay.tui.widgets import ControlsPanel

    viewed: list[str] = []
    real_view = CompareTab.refresh_view

    def refresh_view(self):
        viewed.append(self.id)
        return real_view(self)

    monkeypatch.setattr(CompareTab, "refresh_view", refresh_view)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await wait_until(pilot, lambda: app.tab("compare").ready)
        await pilot.press("2")
        await pilot.pause(0.2)
        viewed.clear()
        run_id = app.session.run_id
        app.action_cycle_preset()  # the `p` key's handler
        assert viewed == []
        assert app.query_one(ControlsPanel)._key[1] == app.session.preset  # shown at once
        await wait_until(pilot, lambda: "compare" in viewed)
        await wait_until(
            pilot, lambda: app.session.live_result is not None and app.session.run_id == run_id + 1
        )
        assert app.session.live_result.spec == app.spec


async def test_closing_the_help_does_not_rebuild_the_footer_with_the_same_keys(tmp_path):
    """Escape from the help: the main screen's footer shows the same keys as before; Textual's
    footer composed and rendered them all again. A change of keys still recomposes it."""
    from textual.widgets import Footer

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        footer = app.main.query_one(Footer)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        keys = list(footer.children)
        assert keys
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, HelpScreen)
        assert list(footer.children) == keys  # the same widgets: not composed again
        footer._shown = ("other keys",)  # what it shows differs from the screen's keys: composed again
        app.refresh_bindings()  # Textual says the bindings changed, as it does after a key
        await pilot.pause(0.2)
        assert footer.children and not set(footer.children) & set(keys)
