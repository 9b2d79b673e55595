"""The Live panel's figures agree: the speedup is shown with the medians of its own pairs, named
as such, beside the run's own median."""

from __future__ import annotations

import math
import re

from rich.console import Console

from gpuplay.core.reports.report import fmt_time
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.widgets import SpeedupDigits, StatsPanel
from tests.tui_helpers import tiny_scenarios, wait_until


def stats_text(app) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(app.query_one(StatsPanel).content)
    return " ".join(console.export_text().split())


def elementwise_app(tmp_path) -> GpuPlayApp:
    """The app with an 8 MB element-wise scenario (past the allocation probe's 4 MiB)."""
    folder = tiny_scenarios(tmp_path / "sc")
    (folder / "elementwise.toml").write_text(
        'name = "elementwise"\ntitle = "elementwise"\nworkload = "elementwise"\n'
        "[params]\nn = 2000000\n[presets.quick]\nn = 2000000\n[presets.published]\nn = 2000000\n"
    )
    return GpuPlayApp([folder], export_dir=tmp_path, budget_s=0.1, telemetry=False)


async def run_elementwise(pilot, app) -> None:
    """Measure the element-wise scenario after the first run, until its result is in."""
    await wait_until(pilot, lambda: app.session.live_result is not None)
    app.choose_scenario("elementwise")
    await wait_until(
        pilot,
        lambda: (
            app.session.live_result is not None and app.session.live_result.spec.workload == "elementwise"
        ),
    )


async def test_the_speedup_the_pairs_medians_and_the_runs_median_are_read_against_each_other(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("b")  # PyTorch: paired with NumPy on the CPU once it has run
        await wait_until(
            pilot, lambda: app.spec is not None and app.session.speedup_for(app.spec) is not None
        )
        await pilot.pause()
        digits = app.query_one(SpeedupDigits)
        record = app.session.speedup_for(app.spec)
        live = app.session.live_result
        assert live is not None and live.spec == app.spec

        # 1. The run's own median, in the stats panel.
        median = re.search(r"median (\S+ \S?s)", stats_text(app))
        assert median and median.group(1) == fmt_time(live.median)
        # 2. The speedup, and 3. the medians it was measured from, named as the pairs' own.
        pairs = re.search(r"their medians: this (\S+ \S?s), NumPy float32 (\S+ \S?s)\)", digits.note)
        assert pairs, digits.note
        assert pairs.group(1) == fmt_time(record["candidate_median_s"])
        assert pairs.group(2) == fmt_time(record["baseline_median_s"])
        # The speedup is the median of the pairs' ratios; the ratio of their medians reads close to it
        # (the same steps, interleaved), never the other way as two runs timed apart can.
        of_medians = record["baseline_median_s"] / record["candidate_median_s"]
        assert digits.speedup is not None
        assert abs(math.log(digits.speedup / of_medians)) < math.log(1.5), (digits.speedup, of_medians)


async def test_the_live_median_is_the_headline_mode_with_the_other_beside_it(tmp_path, monkeypatch):
    from gpuplay.core.runner import measure

    # A fresh process's plain loop (a real child, every large array mapped and unmapped by the
    # mmap threshold in its environment) faults its pages in every step: the headline is its loop,
    # timed after the streamed one.
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "0")
    monkeypatch.setattr(measure, "modes_differ", lambda probe, faults, median: True)
    app = elementwise_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await run_elementwise(pilot, app)
        live = app.session.live_result
        assert live.spec.workload == "elementwise"
        assert live.status == "ok" and live.other_mode is not None, live.conditions
        text = stats_text(app)
        median = re.search(r"median (\S+ \S?s)", text)
        assert median and median.group(1) == fmt_time(live.median), text
        assert f"{fmt_time(live.other_mode['median_s'])} with pages reused" in text


async def test_fresh_processes_that_disagree_show_the_middle_one_and_their_range(tmp_path, monkeypatch):
    from gpuplay.core.runner import measure

    # Three fresh processes' plain loops that read 21.7, 41.3 and 41.9 ms a step, 4,224 to 18,000
    # pages faulted (heat torch 512² on the 2-core machine); the modes differ, so they are asked.
    loops = iter([(0.0217, 4_224.0), (0.0413, 17_408.0), (0.0419, 18_000.0)])

    def reading(spec, budget_s, cancel, max_steps=None):
        median, faults = next(loops)
        return {"faults_per_step": faults, "mean_faults_per_step": faults, "steps": 12,
                "samples_s": [median] * 12}  # fmt: skip

    monkeypatch.setattr(measure, "plain_loop", reading)
    monkeypatch.setattr(measure, "modes_differ", lambda probe, faults, median: True)
    monkeypatch.setattr(measure, "fresh_mode", lambda plain, faults, median: "cold")
    app = elementwise_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await run_elementwise(pilot, app)
        await pilot.pause()
        live = app.session.live_result
        assert live.status == "ok" and live.fresh_spread is not None, live.conditions
        text = stats_text(app)
        assert re.search(r"median 41\.3 ms", text), text
        assert "21.7 ms–41.9 ms in 3 fresh processes" in text, text
