"""The roofline chart and the stats panel's roof and noise lines, in a tiny Pilot app."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gpuplay.core.hw.system import cpu_name
from gpuplay.core.measure import roofline
from gpuplay.core.result import RunResult
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import attach_baselines
from gpuplay.tui.roofline import RooflineChart, describe
from gpuplay.tui.widgets import StatsPanel
from tests.unit.test_roofline import peaks


class Tiny(App[None]):
    def compose(self) -> ComposeResult:
        yield StatsPanel(id="stats")
        yield RooflineChart(id="roofline")


def real_rows():
    results = [
        run(RunSpec.make(w, p, scenario=w, backend=b, budget_s=0.05, min_repeat=3))
        for w, p in (("matmul", {"n": 64}), ("elementwise", {"n": 20000}))
        for b in ("numpy", "torch")
    ]
    assert all(r.status == "ok" for r in results), [r.message for r in results]
    return attach_baselines(results)


def plain(widget) -> str:
    return widget.render().plain


def shown_text(widget) -> str:
    """What the widget paints, line by line."""
    from textual.geometry import Region

    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, *widget.size)))


async def test_chart_draws_roofs_and_every_result():
    rows = real_rows()
    cpu = peaks("cpu", bw=20.0, f32=200.0)
    app = Tiny()
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(RooflineChart)
        chart.show(rows, {"cpu": cpu})
        await pilot.pause()
        text = plain(chart)
        assert "roofline: measured peaks" in text
        assert "cpu roof: 20 GB/s" in text and "cpu float32 200 GFLOP/s" in text
        assert "numpy cpu float32" in text and "torch cpu float32" in text
        assert "matmul" in text and "elementwise" in text
        assert "FLOP/byte" in text
        shown = describe(rows, {"cpu": cpu})
        assert len(shown) == 4 and all(p["calibrated"] for p in shown)
        assert {p["workload"] for p in shown} == {"matmul", "elementwise"}
        # matmul at n=64 does 2n³ FLOPs over 3n² floats: far more FLOP per byte than an element-wise op.
        by = {(p["workload"], p["configuration"]): p["intensity"] for p in shown}
        assert by[("matmul", "numpy cpu float32")] > 5 * by[("elementwise", "numpy cpu float32")]


async def test_chart_without_calibration_still_places_results_and_says_what_to_run():
    rows = real_rows()
    app = Tiny()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(RooflineChart)
        chart.show(rows)  # reads the (empty) cache
        await pilot.pause()
        text = plain(chart)
        assert "cpu not calibrated: run gpuplay calibrate" in text
        assert "matmul" in text


async def test_stats_panel_shows_the_roof_and_the_noise_in_words():
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=2000.0))
    spec = RunSpec.make("matmul", {"n": 64})
    r = RunResult(spec=spec, samples=[0.1] * 8, flops=100e9, bytes=1e9, compute_dtype="float32", error=1e-7)
    r.conditions = {"device_name": cpu_name()}
    r.telemetry = {
        "noise": {
            "host": {
                "window_s": 1.0,
                "cores": 2,
                "own_cores": 1.0,
                "other_cores": 1.3,
                "other_top": [{"name": "make", "pid": 9, "cores": 1.3}],
                "steal_cores": 0.0,
            },
            "gpu": None,
        }
    }
    app = Tiny()
    async with app.run_test(size=(120, 40)) as pilot:
        panel = app.query_one(StatsPanel)
        panel.show(spec, r.summary, "done", {"result": r, "conditions": {}})
        await pilot.pause()
        text = shown_text(panel)
        assert "50% of compute roof" in text and "ridge 100" in text
        assert "other processes used 1.3 cores of 2 during this run" in text
        roofline.invalidate("cpu")
        panel.show(spec, r.summary, "done", {"roof": r.roof_fields(), "noise": [], "conditions": {}})
        await pilot.pause()
        text = shown_text(panel)
        assert "not calibrated: run gpuplay calibrate" in text and "other processes" not in text


async def test_two_results_in_one_cell_are_both_drawn():
    from gpuplay.core.studies.compare import Row

    def made(backend: str, seconds: float) -> Row:
        spec = RunSpec.make("matmul", {"n": 64}, scenario="matmul", backend=backend)
        return Row(
            RunResult(spec=spec, samples=[seconds] * 5, flops=10e9, bytes=1e8, compute_dtype="float32")
        )

    rows = [made("numpy", 1.0), made("torch", 0.97)]  # 10 and 10.3 GFLOP/s at the same intensity
    app = Tiny()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = app.query_one(RooflineChart)
        chart.show(rows, {"cpu": peaks("cpu")})
        await pilot.pause()
        text = plain(chart)
        # each marker twice in the legend, and once more as a point
        assert text.count("●") >= 3 and text.count("◆") >= 3, text
        assert text.count("matmul") == 1  # one label for the pair


async def test_a_result_above_its_stored_roof_reads_stale_in_the_chart_and_the_panel():
    """A roof measured low (a busy or short calibration): the chart's title and the stats panel
    say it is stale and to calibrate again, never a fraction over 100 %."""
    rows = real_rows()
    low = peaks("cpu", bw=0.001, f32=0.001)
    roofline.save_peaks(low)
    app = Tiny()
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(RooflineChart)
        chart.show(rows, {"cpu": low})
        await pilot.pause()
        assert "stale roof: a result is above the roof of cpu: rerun gpuplay calibrate" in plain(chart)
        r = rows[0].result
        panel = app.query_one(StatsPanel)
        panel.show(r.spec, r.summary, "done", {"result": r, "conditions": {}})
        await pilot.pause()
        text = " ".join(shown_text(panel).split())
        assert "stale roof" in text and "rerun gpuplay calibrate" in text and "of compute roof" not in text
