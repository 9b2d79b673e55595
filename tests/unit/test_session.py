"""The live session's state and decisions, without Textual."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.result import RunResult
from gpuplay.core.studies import session as session_module
from gpuplay.core.studies.session import LiveSession
from gpuplay.tui import viewmodels
from tests.tui_helpers import tiny_scenarios


@pytest.fixture
def live(tmp_path: Path) -> LiveSession:
    s = LiveSession(load_scenarios([tiny_scenarios(tmp_path / "sc")]), threads=1)
    s.spec = s.make_spec()
    return s


def _ok(spec, median: float) -> RunResult:
    return RunResult(spec=spec, samples=[median] * 5, error=0.0, tolerance=1e-5)


def test_a_new_run_clears_the_screen_and_stale_events_are_ignored(live):
    first = live.begin_run()
    assert live.add_samples(first, [("timed", 0.1)])
    second = live.begin_run()
    assert live.samples == [] and live.phase == "queued"
    assert not live.add_samples(first, [("timed", 0.2)])
    assert not live.set_phase(first, "timed")
    assert live.set_phase(second, "warmup") and live.phase == "warmup"
    stale = live.finish(first, _ok(live.spec, 0.1), "live")
    assert stale.log and not stale.current and live.live_result is None


def test_a_finished_gpu_side_run_asks_for_its_numpy_baseline_once(live):
    live.spec = live.spec.replace(backend="torch")
    run_id = live.begin_run()
    todo = live.finish(run_id, _ok(live.spec, 0.001), "live")
    assert todo.current and todo.log
    assert todo.start_baseline is not None and todo.start_baseline.backend == "numpy"
    assert live.baseline_running
    # The paired job measures the configuration on screen with its baseline: its speedup.
    paired = _ok(live.spec, 0.001)
    paired.speedup = {"point": 4.0, "interval": [3.9, 4.1], "pairs": 12, "baseline_dtype": "float32",
                      "baseline_median_s": 0.004}  # fmt: skip
    base = live.finish(run_id, paired, "baseline")
    assert base.current and not live.baseline_running
    assert live.live_result.speedup == paired.speedup, "the result on screen carries its speedup"
    # The finished result's own figure is on screen (its headline), streamed samples or not.
    view = viewmodels.speedup_view(live)
    assert view.speedup == pytest.approx(4.0) and view.marker == ""
    assert "12 pairs" in view.note and "3.9–4.1×" in view.note
    again = live.finish(live.begin_run(), _ok(live.spec, 0.001), "live")
    assert again.start_baseline is None, "the speedup is measured once per configuration"


def test_a_wide_interval_or_another_thread_count_is_never_shown_plain(live):
    live.spec = live.spec.replace(backend="torch")
    run_id = live.begin_run()
    todo = live.finish(run_id, _ok(live.spec, 0.001), "live")
    wide = _ok(live.spec, 0.001)
    wide.speedup = {"point": 2.0, "interval": [1.0, 3.0], "pairs": 8}
    live.finish(run_id, wide, "baseline")
    live.add_samples(run_id, [("timed", 0.001)] * 3)
    view = viewmodels.speedup_view(live)
    assert view.marker == "~" and "wide" in view.reason and view.short == "wide interval"
    assert viewmodels.stats_info(live)["speedup_reason"] == view.reason, "the full reason, one look away"
    # Another thread count is another configuration: its speedup is measured anew, not divided.
    live.threads = 2
    live.spec = live.make_spec(live.spec)
    assert viewmodels.speedup_view(live).speedup is None
    todo = live.finish(live.begin_run(), _ok(live.spec, 0.001), "live")
    assert todo.start_baseline is not None and todo.start_baseline.threads == 2


def test_failures_are_reported_not_logged(live):
    run_id = live.begin_run()
    failed = RunResult(spec=live.spec, status="failed", message="out of memory on cpu")
    todo = live.finish(run_id, failed, "live")
    assert not todo.log and todo.notify and "out of memory" in todo.notify[0][0]
    assert live.phase == "failed"


def test_old_results_are_dropped_with_their_baselines(live, monkeypatch):
    monkeypatch.setattr(session_module, "MAX_SESSION_RESULTS", 2)
    specs = [live.spec.replace(seed=i) for i in range(3)]
    for spec in specs:
        live.finish(live.begin_run(), _ok(spec, 0.01), "live")
    assert len(live.results) == 2
    assert specs[0] not in live.baselines and specs[2] in live.baselines


def test_presets_and_scenarios_keep_the_levers(live):
    live.spec = live.spec.replace(backend="torch", dtype="float64")
    live.cycle_preset()
    assert live.preset == "published" and live.spec.backend == "torch" and live.spec.dtype == "float64"
    assert live.choose_scenario("fft2d")
    assert live.spec.workload == "fft2d" and live.spec.backend == "torch"
    assert not live.choose_scenario("no-such-scenario")
    assert viewmodels.chart_title(live).startswith("fft2d · ")


def test_a_scenario_that_needs_torch_is_chosen_on_torch(tmp_path):
    """The dataloader is torch's DataLoader: picked in the live app on NumPy (the default backend),
    it runs on torch as `gpuplay run dataloader` does, instead of a refusal screen."""
    s = LiveSession(load_scenarios(), threads=1)
    s.spec = s.make_spec()
    assert s.spec.backend == "numpy"
    assert s.choose_scenario("dataloader")
    assert s.spec.workload == "dataloader" and s.spec.backend == "torch"
