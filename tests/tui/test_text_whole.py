"""Text a new user reads is never cut in the middle of a figure: a value and its unit stay on one
line, and a reason cut to the controls' width can be read whole (tooltip, help screen)."""

from __future__ import annotations

import pytest

from gpuplay.tui.keeptogether import keep_together
from tests.snapshot_feed import feed
from tests.tui_helpers import tiny_scenarios, wait_until


@pytest.mark.parametrize(
    ("text", "width", "lines"),
    [
        ("21.4 ms – 27.5 ms", 12, ["21.4 ms –", "27.5 ms"]),
        ("3e-07✓ vs float64", 12, ["3e-07✓", "vs float64"]),
        ("0.0492 GFLOP/s  0.00462 GB/s", 20, ["0.0492 GFLOP/s", "0.00462 GB/s"]),
        ("24 pairs with NumPy float32 21.2 ms)", 14, ["24 pairs with", "NumPy float32", "21.2 ms)"]),
        ("short", 40, ["short"]),
    ],
)
def test_lines_break_between_figures(text, width, lines):
    assert keep_together(text, width).plain.split("\n") == lines


def app_at(tmp_path):
    from gpuplay.tui.app import GpuPlayApp

    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path
    )


def lines_of(widget) -> list[str]:
    return ["".join(s.text for s in widget.render_line(y)).rstrip() for y in range(widget.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_live_figures_keep_their_units(tmp_path, size):
    from gpuplay.tui.widgets import SpeedupDigits, StatsPanel

    app = app_at(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        await pilot.pause()
        stats = lines_of(app.query_one(StatsPanel))
        digits = lines_of(app.query_one(SpeedupDigits))
        # the first word of each value's line: after the label, or the line's first on a continuation
        firsts = [ln.split()[0 if ln.startswith(" ") else 1] for ln in stats if len(ln.split()) > 1]
        firsts += [ln.split()[0] for ln in digits if ln.split()]
        shown = stats + digits
        units = {"ms", "s", "µs", "GB/s", "GFLOP/s", "pairs", "cores", "float64"}
        assert not set(firsts) & units, "\n".join(shown)  # a unit never starts a line
        assert not any(ln.endswith((" vs", "(95%")) for ln in shown), "\n".join(shown)
        assert any("torch cpu float32" in line for line in shown), shown


async def test_a_cut_reason_is_whole_in_the_tooltip_and_on_the_help_screen(tmp_path):
    from gpuplay.tui.widgets import ControlsPanel

    app = app_at(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        panel = app.query_one(ControlsPanel)
        assert panel.reasons, "this machine has no GPU: something is unavailable"
        assert any(line.endswith("…") for line in lines_of(panel)), lines_of(panel)  # cut at 80
        longest = max(panel.reasons, key=len)
        assert longest in str(panel.tooltip)
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = str(app.screen.query_one("#help-unavailable").render())
        assert "unavailable here" in help_text and longest in help_text.replace("\n", " ")


async def test_the_live_figures_past_the_fixed_top_scroll_and_a_refusal_reads_first(tmp_path):
    """At 80×24 the Live figures are taller than their fixed top: their last rows were cut off
    unmarked (a refusal's reason among them). The reason now follows the phase, and the rest
    scrolls, with a scrollbar to say there is more."""
    from gpuplay.tui.widgets import StatsPanel

    app = app_at(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed(app)
        await pilot.pause()
        panel = app.query_one(StatsPanel)
        spec, summary, phase, info = panel._args
        panel.show(
            spec, summary, "refused", {**info, "message": "one step is estimated at 3.1 s (limit 2.0 s)"}
        )
        await pilot.pause()
        scroll = app.query_one("#stats-scroll")
        visible_rows = lines_of(panel)[: scroll.size.height]
        assert any(line.startswith("status") for line in visible_rows[:4]), visible_rows
        assert scroll.max_scroll_y > 0 and scroll.show_vertical_scrollbar
        scroll.scroll_end(animate=False)
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y  # the last rows can be reached
