"""The step chart keeps the steps readable when the first compile took 10⁴× a step."""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App, ComposeResult

from gpuplay.tui.widgets import StepChart


class ChartApp(App[None]):
    def compose(self) -> ComposeResult:
        yield StepChart(id="chart")


def _text(app: App) -> str:
    console = Console(width=app.size.width, height=app.size.height, record=True, file=io.StringIO())
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


async def test_a_slow_compile_is_clipped_with_a_marker_and_its_time():
    samples = [
        ("compile", 16.2),
        *[("warmup", 0.004)] * 3,
        *[("timed", 0.002 + 0.0001 * (i % 5)) for i in range(40)],
    ]
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(StepChart)
        chart.show(samples, 0.0022, "matmul · step times")
        await pilot.pause()
        text = _text(app)
    assert chart.clipped == 16.2
    assert "compile 16.2 s (off scale)" in text and "▲" in text
    assert "ms" in text  # the steps' scale, not seconds squashed by the compile
    ticks = [line.split("┤")[0].strip() for line in text.splitlines() if "┤" in line]
    assert ticks and max(float(t) for t in ticks if t.replace(".", "", 1).isdigit()) < 10  # ms, not 16 000


async def test_without_compile_nothing_is_clipped():
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(StepChart)
        chart.show([("timed", 0.002)] * 10, 0.002, "t")
        await pilot.pause()
    assert chart.clipped is None


async def test_a_chart_is_built_once_per_data_and_size_and_not_while_hidden(monkeypatch):
    """plotext builds a figure in ~20-100 ms: a size seen before with the same data (the help panel
    opened then closed, a tab switched away and back) reuses its render; a hidden chart builds
    nothing until it is shown; new data builds again (key → repaint)."""
    from textual_plotext import PlotextPlot

    builds: list[tuple[int, int]] = []
    real = PlotextPlot.render

    def counted(self):
        builds.append((self.size.width, self.size.height))
        return real(self)

    monkeypatch.setattr(PlotextPlot, "render", counted)
    samples = [("timed", 0.002 + 0.0001 * (i % 5)) for i in range(40)]
    app = ChartApp()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(StepChart)
        chart.display = False
        await pilot.pause()
        builds.clear()  # the empty chart drawn at mount
        chart.show(samples, 0.0022, "hidden")
        await pilot.pause()
        assert builds == []  # not visible: not built
        chart.display = True
        await pilot.pause()
        assert builds == [(100, 30)]
        for size in ((80, 24), (100, 30), (80, 24), (100, 30)):  # back and forth between two layouts
            await pilot.resize_terminal(*size)
            await pilot.pause()
        assert builds == [(100, 30), (80, 24)]
        text = _text(app)
        chart.show([*samples, ("timed", 0.003)], 0.0022, "more")  # new data: built again
        await pilot.pause()
        assert builds[-1] == (100, 30) and len(builds) == 3
    assert "hidden" in text
