"""What a new user reads is neither covered nor moved: notifications over the scenario list, the
Live chart where it was when the speedup panel grows, the controls' values where they were when a
scenario adds a control; the telemetry axis in seconds ago, its legend over no data; every key in
the help explained; the header's subtitle whole."""

from __future__ import annotations

import math

import pytest

from gpuplay.tui.commands import help_rows
from gpuplay.tui.layout import sub_title_for
from tests.snapshot_feed import feed
from tests.tui_helpers import tiny_scenarios, wait_until


def make_app(tmp_path):
    from gpuplay.tui.app import GpuPlayApp

    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


def lines_of(widget) -> list[str]:
    return ["".join(s.text for s in widget.render_line(y)).rstrip() for y in range(widget.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
async def test_a_notification_covers_the_scenario_list_only(tmp_path, size):
    from textual.widgets._toast import Toast

    app = make_app(tmp_path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        app.notify("a message long enough to wrap over two or three lines of the toast", timeout=30)
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)))
        await pilot.pause()
        sidebar = app.query_one("#sidebar").region
        toast = app.screen.query_one(Toast).region
        assert toast.width > 0 and toast.right <= sidebar.right and toast.y >= 1, (toast, sidebar)
        # A second one (an export after a refused lever) does not stack down over the controls
        app.notify("exported\ngpuplay-session-20261128-072309 (.json, .csv, .md) in /a/folder", timeout=30)
        await pilot.pause()
        await pilot.pause()
        scenarios = app.query_one("#scenarios").region
        toasts = [t.region for t in app.screen.query(Toast)]
        assert all(t.bottom <= scenarios.bottom + 1 for t in toasts), (toasts, scenarios)


async def test_the_live_chart_stays_put_when_the_speedup_panel_grows(tmp_path):
    from gpuplay.tui.widgets import SpeedupDigits

    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        await pilot.pause()
        before = app.query_one("#chart").region  # nothing measured yet: a short stats panel
        feed(app)
        app.query_one(SpeedupDigits).show(2.0, "a note\n" * 4, "~", "why " * 30, "noisy run")
        await pilot.pause()
        assert app.query_one("#chart").region == before


async def test_the_controls_values_do_not_move_when_a_scenario_adds_a_control(tmp_path):
    from gpuplay.tui.widgets import ControlsPanel

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.probed)

        def value_column() -> int:
            line = next(ln for ln in lines_of(app.query_one(ControlsPanel)) if "backend" in ln)
            return line.index("NumPy")

        matmul = value_column()
        app.choose_scenario("svd")  # adds "i linalg library" on a torch spec; the column is fixed
        await pilot.pause()
        assert value_column() == matmul


async def test_the_telemetry_axis_says_seconds_ago_and_the_legend_sits_over_no_data():
    from textual.app import App

    from gpuplay.core.measure.telemetry import HostSnapshot, Snapshot
    from gpuplay.tui.widgets import TelemetryChart

    history = [
        Snapshot(float(t), 0.0, HostSnapshot([99.0, 99.0], 6 * 2**30, 24 * 2**30, 2**29), [])
        for t in range(0, 120, 2)
    ]

    class Tiny(App):
        def compose(self):
            yield TelemetryChart()

    app = Tiny()
    async with app.run_test(size=(70, 24)) as pilot:
        app.query_one(TelemetryChart).show(history, "cpu")
        await pilot.pause()
        lines = lines_of(app.query_one(TelemetryChart))
        text = "\n".join(lines)
        assert "s ago" in text and "now" in text and "(s)" not in text, text
        legend = max(i for i, ln in enumerate(lines) if "host mem %" in ln or "CPU %" in ln)
        top = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("100"))
        assert legend < top, text  # the 99 % line runs below the legend, not behind it


def test_every_key_in_the_help_says_what_it_does():
    from gpuplay.tui.app import GpuPlayApp

    rows = help_rows(GpuPlayApp.BINDINGS, {})
    bare = [(key, what) for key, what in rows if " — " not in what and key != "↑ ↓"]
    assert not bare, bare
    assert any(what.startswith("preset — ") for _, what in rows)
    assert any(what.startswith("format — ") for _, what in rows)
    tabs = [what for _, what in rows if " — show the " in what]
    assert tabs and all(" tab: " in what for what in tabs), tabs  # each tab says what it holds


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_header_subtitle_fits(width):
    title = sub_title_for(width)
    assert len(title) + 28 <= width or width < 62
    assert "CPU → GPU" in title if width >= 62 else True
    assert not math.isnan(width)


async def test_moving_in_the_scenario_list_clears_the_toasts_over_it(tmp_path):
    """Toasts sit over the scenario list; one that stayed hid the highlight that ↓ moves (the
    key looked dead for the toast's eight seconds)."""
    from textual.widgets._toast import Toast

    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.probed)
        app.notify("a refusal's reason", timeout=30)
        await wait_until(pilot, lambda: bool(app.screen.query(Toast)))
        app.query_one("#scenarios").focus()
        await pilot.press("down")
        await wait_until(pilot, lambda: not app.screen.query(Toast))
