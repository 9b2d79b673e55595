"""Paired, interleaved speedups: the statistics, the ABBA loop, the runner, the engine, the rows."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from gpuplay.core.measure.stats import PairedSpeedup, paired_speedup
from gpuplay.core.reports.report import row_cells, to_csv, to_json
from gpuplay.core.result import RunResult
from gpuplay.core.runner.paired import interleave, run_paired
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import Row, baseline_spec, run_compare


def test_the_speedup_is_the_median_of_per_pair_ratios_with_a_seeded_interval():
    rng = np.random.default_rng(1)
    drift = np.linspace(1.0, 3.0, 40)  # the machine slows down threefold during the run
    base = list(0.004 * drift * rng.uniform(0.97, 1.03, 40))
    cand = list(0.001 * drift * rng.uniform(0.97, 1.03, 40))
    s = paired_speedup(base, cand)
    assert s is not None and s.pairs == 40
    assert s.point == pytest.approx(4.0, rel=0.03)
    assert s.low < 4.0 < s.high and not s.wide, "drift shared by both sides cancels in each ratio"
    assert paired_speedup(base, cand) == s, "the same pairs give the same interval"
    # The ratio of medians of two sides measured apart would carry the drift instead.
    assert np.median(base[:20]) / np.median(cand[20:]) < 3.0


def test_too_few_or_noisy_pairs_are_wide_and_say_why():
    few = paired_speedup([2.0, 2.0], [1.0, 1.0])
    assert few is not None and few.interval is None and few.wide and "too few" in few.reason()
    noisy = paired_speedup([1, 9, 1, 9, 1, 9, 1, 9], [1, 1, 1, 1, 1, 1, 1, 1])
    assert noisy is not None and noisy.wide and "wide" in noisy.reason()
    assert paired_speedup([], []) is None
    assert paired_speedup([0.0, -1.0], [1.0, 1.0]) is None  # nothing measurable


def test_a_stored_speedup_is_read_back_bounded():
    s = PairedSpeedup(3.0, 2.9, 3.1, 20)
    assert PairedSpeedup.from_dict(s.to_dict()) == s
    assert PairedSpeedup.from_dict({"point": float("nan")}) is None
    assert PairedSpeedup.from_dict({"point": "x"}) is None
    assert PairedSpeedup.from_dict({"point": -2}) is None
    assert PairedSpeedup.from_dict("3.0") is None  # type: ignore[arg-type]


def test_pairs_run_in_abba_blocks_until_the_count():
    order: list[str] = []

    def timer(fn):
        fn()
        return 0.001, None

    out = interleave(lambda: order.append("A"), timer, 1, lambda: order.append("B"), timer, 2,
                     pairs=4, budget_s=None, min_pairs=1, max_pairs=100, cancel=threading.Event())  # fmt: skip
    assert "".join(order) == "ABBBBAABBBBA"  # B repeats twice per element (µs steps)
    assert len(out.baseline) == len(out.candidate) == 4 and not out.cancelled
    stop = threading.Event()
    stop.set()
    assert interleave(lambda: None, timer, 1, lambda: None, timer, 1, pairs=4, budget_s=None,
                      min_pairs=1, max_pairs=9, cancel=stop).cancelled  # fmt: skip


def test_a_paired_run_measures_both_sides_and_checks_both():
    spec = RunSpec.make("matmul", {"n": 48}, backend="torch", repeat=6, threads=1)
    r = run_paired(spec, baseline_spec(spec))
    assert r.status == "ok", r.message
    assert len(r.samples) == 6 and r.check_ok
    assert r.conditions["paired_with"] == "numpy cpu float32"
    assert r.speedup is not None and r.speedup["pairs"] == 6 and r.speedup["baseline_check_ok"] is True
    assert r.speedup["point"] > 0 and len(r.speedup["interval"]) == 2


def test_the_engine_pairs_a_run_that_names_a_baseline():
    from gpuplay.core.engine.messages import Finished, RunRequest, decode, encode
    from gpuplay.core.engine.server import EngineServer

    sent: list[bytes] = []
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    request = decode(encode(RunRequest(7, spec, False, baseline_spec(spec))))  # as it crosses the pipe
    EngineServer(SimpleNamespace(send_bytes=sent.append)).do(request)
    answer = decode(sent[-1])
    doc = json.loads(sent[-1])["result"]
    assert isinstance(answer, Finished) and answer.run_id == 7 and doc["status"] == "ok"
    assert doc["speedup"]["pairs"] == 4 and doc["conditions"]["paired_with"].startswith("numpy")
    assert RunResult.from_dict(doc).speedup == doc["speedup"]


def test_compare_pairs_every_row_with_its_own_baseline():
    calls: list[tuple[str, str | None]] = []

    def fake(spec, *, cancel=None, telemetry=None, paired_with=None, on_baseline=None):
        calls.append((spec.backend, paired_with.backend if paired_with else None))
        return RunResult(spec=spec, samples=[0.01] * 3)

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    run_compare([baseline_spec(spec), spec], measure=fake)
    # The pairs gave no baseline row (this fake hands none): NumPy's row is measured alone after.
    assert calls == [("torch", "numpy"), ("numpy", None)]
    calls.clear()
    assert [r.spec.backend for r in run_compare([baseline_spec(spec), spec], measure=fake, paired=False)] == [
        "numpy",
        "torch",
    ]
    assert calls == [("numpy", None), ("torch", None)]


def test_compare_takes_the_baseline_row_from_the_first_pairs_and_measures_it_once():
    calls: list[tuple[str, str | None]] = []
    heard: list[tuple[int, str]] = []

    def fake(spec, *, cancel=None, telemetry=None, paired_with=None, on_baseline=None):
        calls.append((spec.label(), paired_with.backend if paired_with else None))
        if on_baseline is not None:
            on_baseline(
                RunResult(spec=paired_with, samples=[0.02] * 3, conditions={"paired_with": spec.label()})
            )
        return RunResult(spec=spec, samples=[0.01] * 3)

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    half = RunSpec.make("matmul", {"n": 32}, backend="torch", dtype="bfloat16")
    base = baseline_spec(spec)
    assert baseline_spec(half) == base
    out = run_compare(
        [base, spec, half], measure=fake, on_result=lambda i, r: heard.append((i, r.spec.label()))
    )
    assert calls == [("torch cpu float32", "numpy"), ("torch cpu bfloat16", "numpy")], "NumPy never alone"
    assert [r.spec for r in out] == [base, spec, half]
    assert out[0].conditions["paired_with"] == "torch cpu float32", "the first row's pairs give it"
    assert heard == [(0, "numpy cpu float32"), (1, "torch cpu float32"), (2, "torch cpu bfloat16")]


def _row(speedup: dict | None, base_median: float = 0.004) -> Row:
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    r = RunResult(spec=spec, samples=[0.001] * 5, speedup=speedup)
    base = RunResult(spec=baseline_spec(spec), samples=[base_median] * 5)
    return Row(r, base)


def test_exports_carry_the_interval_and_mark_what_should_not_be_read_as_printed():
    steady = _row({"point": 3.5, "interval": [3.4, 3.6], "pairs": 30})
    wide = _row({"point": 3.5, "interval": [2.0, 5.0], "pairs": 8})
    unpaired = _row(None)
    assert steady.speedup == 3.5 and steady.speedup_marker == ""
    assert wide.speedup_marker == "~" and "wide" in wide.speedup_reason
    assert unpaired.speedup == pytest.approx(4.0) and "unpaired" in unpaired.speedup_reason
    cells = row_cells(wide)
    assert cells[9].startswith("~3.5×") and "[2–5]" in cells[9]
    assert any("~ speedup:" in n for n in cells[-1].split("; "))
    doc = json.loads(to_json([steady, wide]))
    assert doc["results"][0]["speedup_interval"] == [3.4, 3.6] and doc["results"][0]["speedup_pairs"] == 30
    assert doc["results"][0]["speedup_unstable"] is None and "wide" in doc["results"][1]["speedup_unstable"]
    csv_lines = to_csv([steady]).splitlines()
    header, values = csv_lines[0].split(","), csv_lines[1].split(",")
    assert values[header.index("speedup_low")] == "3.4" and values[header.index("speedup_pairs")] == "30"


def test_a_cold_pair_returns_pages_before_every_step_of_both_sides():
    events: list[str] = []

    def timer(fn):
        fn()
        return 0.001, None

    interleave(lambda: events.append("A"), timer, 1, lambda: events.append("B"), timer, 1, pairs=2,
               budget_s=None, min_pairs=1, max_pairs=9, cancel=threading.Event(),
               between=lambda: events.append("trim"))  # fmt: skip
    assert events == ["trim", "A", "trim", "B", "trim", "B", "trim", "A"]
    spec = RunSpec.make("elementwise", {"n": 32}, backend="torch", alloc="cold")
    assert baseline_spec(spec).alloc == "cold", "both sides in the same allocation mode"


def test_pairs_that_fault_heavily_say_the_speedup_is_for_the_cold_mode(monkeypatch):
    from gpuplay.core.runner import paired as paired_module

    calls: list[int] = []

    def counts() -> int:  # getrusage: 0 before the pairs, 6 × 5000 from then on (each side's counts too)
        calls.append(1)
        return 0 if len(calls) == 1 else 6 * 5000

    monkeypatch.setattr(paired_module, "minor_faults", counts)
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=6, threads=1)
    r = run_paired(spec, baseline_spec(spec))
    assert r.conditions["page_faults_per_pair"] == 5000
    assert any(n.startswith("allocation-bound pairs: 5,000 page faults per pair") for n in r.notes)


# -- one paired measurement, both rows ------------------------------------------
def test_one_paired_run_gives_the_baselines_own_row_warmed_checked_and_said_interleaved():
    from gpuplay.core.runner.paired import run_pair

    spec = RunSpec.make("matmul", {"n": 48}, backend="torch", repeat=6, threads=1, warmup=2)
    r, base = run_pair(spec, baseline_spec(spec))
    assert r.status == "ok" and base is not None and base.status == "ok", (r.message, base)
    assert base.spec == baseline_spec(spec) and len(base.samples) == 6 and len(base.warmup) == 2
    assert base.check_ok is True and base.error is not None and base.tolerance is not None
    assert base.conditions["paired_with"] == "torch cpu float32"
    assert base.conditions["timed"].startswith("interleaved: 6 ABBA pairs with torch cpu float32")
    assert base.conditions["backend"] == "numpy" and "page_faults_per_step" in base.conditions
    assert base.estimate_s is not None and base.setup_s is not None and base.finished
    # The speedup's baseline figure is this row's own median: the same samples.
    assert r.speedup is not None and r.speedup["baseline_median_s"] == base.median


def test_the_baseline_rows_check_can_fail(monkeypatch):
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads import linalg

    real = linalg.Matmul.kernel_function

    def wrong_on_numpy(self, backend, p):
        return (lambda xp, a, b: a @ b + 1e-3) if backend == "numpy" else real(self, backend, p)

    monkeypatch.setattr(linalg.Matmul, "kernel_function", wrong_on_numpy)
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", repeat=4, threads=1)
    r, base = run_pair(spec, baseline_spec(spec))
    assert r.check_ok is True and base is not None and base.status == "ok" and base.check_ok is False
    assert r.speedup is not None and r.speedup["baseline_check_ok"] is False


def test_a_baseline_that_fails_is_its_own_failed_row_and_a_candidate_refused_first_gives_none(monkeypatch):
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads import linalg

    real = linalg.Matmul.kernel_function

    def broken_on_numpy(self, backend, p):
        def boom(xp, a, b):
            raise RuntimeError("boom")

        return boom if backend == "numpy" else real(self, backend, p)

    monkeypatch.setattr(linalg.Matmul, "kernel_function", broken_on_numpy)
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    r, base = run_pair(spec, baseline_spec(spec))
    assert r.status == "failed" and "the NumPy baseline" in r.message
    assert base is not None and base.status == "failed" and "boom" in base.message
    monkeypatch.undo()
    tiny = RunSpec.make("matmul", {"n": 1024}, backend="torch", repeat=4, threads=1, max_step_s=0.001)
    r, base = run_pair(tiny, baseline_spec(tiny))
    assert r.status == "refused" and base is None, "no baseline row: the caller measures it alone"


def _fake_clock(monkeypatch, durations: dict[str, float]):
    """A clock the pairs' own timer advances: A's step lasts durations['A'], B's durations['B']."""
    from gpuplay.core.runner import paired as paired_module

    now = [0.0]
    monkeypatch.setattr(paired_module.time, "perf_counter", lambda: now[0])

    def timer_for(side: str):
        def timer(fn):
            fn()
            now[0] += durations[side]
            return durations[side], None

        return timer

    return timer_for


def test_the_budget_is_each_sides_window_so_the_slower_side_gets_an_unpaired_runs_count(monkeypatch):
    timer_for = _fake_clock(monkeypatch, {"A": 1 / 64, "B": 1 / 256})  # exact in binary
    out = interleave(lambda: None, timer_for("A"), 1, lambda: None, timer_for("B"), 1, pairs=None,
                     budget_s=1 / 8, min_pairs=2, max_pairs=1000, cancel=threading.Event())  # fmt: skip
    # A (1/64 s a step) is timed for its 1/8 s budget: 8 samples, as an unpaired run of it would
    # have; B as many. A budget counted over both sides' wall time gave 7.
    assert len(out.baseline) == len(out.candidate) == 8
    timer_for = _fake_clock(monkeypatch, {"A": 1 / 64, "B": 1 / 64})
    out = interleave(lambda: None, timer_for("A"), 1, lambda: None, timer_for("B"), 1, pairs=None,
                     budget_s=1 / 8, min_pairs=2, max_pairs=1000, cancel=threading.Event())  # fmt: skip
    assert len(out.baseline) == 8, "equal sides: each has its budget, two budgets in all (was 4)"


def test_each_side_counts_its_own_page_faults():
    faults = [0]

    def timer(fn):
        fn()
        return 0.001, None

    def faulting():
        faults[0] += 100

    out = interleave(faulting, timer, 2, lambda: None, timer, 1, pairs=3, budget_s=None, min_pairs=1,
                     max_pairs=9, cancel=threading.Event(), faults=lambda: faults[0])  # fmt: skip
    assert out.faults_baseline == 3 * 2 * 100 and out.faults_candidate == 0
    assert interleave(faulting, timer, 1, lambda: None, timer, 1, pairs=2, budget_s=None, min_pairs=1,
                      max_pairs=9, cancel=threading.Event(), faults=lambda: None).faults_baseline is None  # fmt: skip


def test_the_engine_answers_a_paired_request_with_both_rows():
    from gpuplay.core.engine.messages import Finished, RunRequest, decode, encode
    from gpuplay.core.engine.server import EngineServer

    sent: list[bytes] = []
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    request = decode(encode(RunRequest(8, spec, False, baseline_spec(spec))))
    EngineServer(SimpleNamespace(send_bytes=sent.append)).do(request)
    answer = decode(sent[-1])
    assert isinstance(answer, Finished) and answer.baseline is not None
    assert answer.baseline.spec == baseline_spec(spec) and answer.baseline.status == "ok"
    assert len(answer.baseline.samples) == 4 and answer.baseline.check_ok is True
    assert answer.result.speedup is not None
    assert answer.result.speedup["baseline_median_s"] == answer.baseline.median
    unpaired = decode(encode(RunRequest(9, spec, False)))
    EngineServer(SimpleNamespace(send_bytes=sent.append)).do(unpaired)
    assert decode(sent[-1]).baseline is None  # type: ignore[union-attr]


def test_in_process_measure_hands_the_baseline_row_to_its_caller(monkeypatch):
    from gpuplay.core.engine import measure
    from gpuplay.core.engine.inprocess import InProcessEngine

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    heard: list[RunResult] = []
    r = measure(spec, paired_with=baseline_spec(spec), on_baseline=heard.append)
    assert r.status == "ok" and [b.spec for b in heard] == [baseline_spec(spec)]
    heard.clear()
    InProcessEngine().run(spec, paired_with=baseline_spec(spec), on_baseline=heard.append)
    assert len(heard) == 1 and heard[0].status == "ok" and len(heard[0].samples) == 4


def test_no_measured_apart_note_when_the_baseline_row_is_from_the_same_pairs():
    from gpuplay.core.reports.report import row_cells
    from gpuplay.core.runner.paired import speedup_record
    from gpuplay.core.studies.compare import attach_baselines

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    # 21 pairs: every ratio 1 but one 0.1 (median 1, interval 1–1); the medians' ratio 1/10.
    base = RunResult(baseline_spec(spec), samples=[1.0 if i < 11 else 10.0 for i in range(21)])
    cand = RunResult(spec, samples=[1.0 if i < 10 else 10.0 for i in range(21)])
    cand.speedup = speedup_record(paired_speedup(base.samples, cand.samples), base)
    assert "measured apart" in row_cells(attach_baselines([base, cand])[1])[-1]
    base.conditions["paired_with"] = spec.label()  # the row is the baseline side of these pairs
    assert "measured apart" not in row_cells(attach_baselines([base, cand])[1])[-1]


def test_the_baseline_row_carries_the_host_side_of_the_pairs_window():
    from gpuplay.core.runner.paired import run_pair

    class Window:
        def begin(self, device, own_pids=()):
            return "token"

        def end(self, token):
            return {"duration_s": 0.5, "host_cpu_mean_percent": 90.0, "process_rss_bytes": 1,
                    "noise": {"host": {"verdict": "busy"}, "gpu": {"verdict": "x"}},
                    "gpu": {"energy_j": 3.0}, "gpu_note": ""}  # fmt: skip

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    r, base = run_pair(spec, baseline_spec(spec), telemetry=Window())
    assert base is not None and r.telemetry["gpu"] == {"energy_j": 3.0}
    assert base.telemetry["noise"] == {"host": {"verdict": "busy"}, "gpu": None}, (
        "the host's noise is both rows'"
    )
    assert base.telemetry["gpu"] is None and base.telemetry["duration_s"] == 0.5, (
        "the GPU's figures are not NumPy's"
    )


# -- the paired rows' edge cases ---------------------------------------------------------------------
_NUMPY_ONLY_FAILS = """
PARAMS = {"n": {"default": 64, "help": "n"}}


def inputs(rng, n):
    return rng.standard_normal((n,))


def step(xp, x):
    if "numpy" in str(getattr(xp, "__name__", xp)) and "float32" in str(x.dtype):
        raise ValueError("the numpy side is broken")
    return x * 2
"""


def test_a_code_file_failing_on_numpy_only_is_the_baselines_failed_row_not_torchs(tmp_path):
    # The user's step raises on NumPy only: that is the baseline's row, failed once (not measured a
    # second time alone), and the torch row says the failure was the baseline's, not its own.
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads.usercode import code_ref

    path = tmp_path / "npfails.py"
    path.write_text(_NUMPY_ONLY_FAILS)
    spec = RunSpec.make(code_ref(path), {}, backend="torch", repeat=3, warmup=1, threads=1)
    r, base = run_pair(spec, baseline_spec(spec))
    assert base is not None and base.status == "failed" and base.failure == "user-code", base
    assert "the numpy side is broken" in base.message and base.detail
    assert r.status == "failed" and r.message.startswith("the NumPy baseline: "), r.message


def test_the_timed_condition_says_when_the_minimum_of_pairs_ended_them():
    from gpuplay.core.runner.paired import MIN_PAIRS, run_pair

    # A budget under one step (a 384² matmul: ms on the host): the minimum of pairs ended them.
    spec = RunSpec.make("matmul", {"n": 384}, backend="torch", budget_s=0.001, threads=1, warmup=1)
    r, base = run_pair(spec, baseline_spec(spec))
    assert base is not None and len(base.samples) == MIN_PAIRS, (r.status, r.message, base)
    assert f"the minimum of {MIN_PAIRS} pairs" in base.conditions["timed"], base.conditions["timed"]


def test_a_baseline_row_of_other_pairs_with_the_same_label_still_gets_the_measured_apart_note():
    # Two runs of one configuration in a session (history, gpuplay.run then gpuplay.compare): the
    # later NumPy row is the baseline side of the later pairs, not of these, whatever the label says.
    from gpuplay.core.reports.report import row_cells
    from gpuplay.core.runner.paired import speedup_record
    from gpuplay.core.studies.compare import attach_baselines

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    base = RunResult(baseline_spec(spec), samples=[1.0 if i < 11 else 10.0 for i in range(21)])
    cand = RunResult(spec, samples=[1.0 if i < 10 else 10.0 for i in range(21)])
    cand.speedup = speedup_record(paired_speedup(base.samples, cand.samples), base)
    base.conditions["paired_with"] = spec.label()
    base.started = cand.started = "2026-11-27T10:00:00+00:00"
    # The later pairs' NumPy side: the same label, even the same median, another measurement.
    later = RunResult(baseline_spec(spec), samples=list(base.samples), conditions={"paired_with": spec.label()},
                      started="2026-11-27T10:00:07+00:00")  # fmt: skip
    rows = attach_baselines([base, cand, later])
    assert rows[1].baseline is later
    assert "measured apart" in row_cells(rows[1])[-1]


def test_a_baseline_step_that_fails_during_the_pairs_is_the_baselines_failure(monkeypatch):
    # NumPy's step raises only once the pairs have started (a host OOM, a user's step failing on
    # a later call): the failure is the baseline's row's, and the torch row says it was NumPy's.
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads import linalg

    real = linalg.Matmul.kernel_function
    armed: list[bool] = []

    def breaks_in_the_pairs(self, backend, p):
        fn = real(self, backend, p)

        def step(xp, a, b):
            if armed:
                raise RuntimeError("numpy broke in the pairs")
            return fn(xp, a, b)

        return step if backend == "numpy" else fn

    monkeypatch.setattr(linalg.Matmul, "kernel_function", breaks_in_the_pairs)
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=4, threads=1)
    r, base = run_pair(
        spec, baseline_spec(spec), on_phase=lambda name, _d: armed.append(True) if name == "paired" else None
    )
    assert base is not None and base.status == "failed" and "numpy broke" in base.message, base
    assert r.status == "failed" and r.message.startswith("the NumPy baseline: "), r.message

    class Window:  # the telemetry window a step raising in the pairs must still close (GPM, a thread)
        ended = 0

        def begin(self, device, own_pids=()):
            return "token"

        def end(self, token):
            Window.ended += 1
            return {}

    armed.clear()
    r, _ = run_pair(spec, baseline_spec(spec), telemetry=Window(),
                    on_phase=lambda name, _d: armed.append(True) if name == "paired" else None)  # fmt: skip
    assert r.status == "failed" and Window.ended == 1, "the pairs' window was left open"


def test_the_baseline_rows_check_reads_its_cold_probes_last_output_as_an_unpaired_run_does(monkeypatch):
    # The baseline's cold-allocation probe keeps its last output for the check (runner.measure):
    # the paired check reads it too, not one more step beside it (two large outputs alive).
    import numpy as np

    from gpuplay.core.runner import clear_caches
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads import linalg

    n = 640  # past the probe's 4 MiB: the baseline's cold-allocation probe runs
    checks: list[int] = []  # NumPy's full-size calls made since each 'check' phase began
    real = linalg.matmul

    def counted(xp, a, b):
        if xp is np and a.shape[0] == n and checks:
            checks[-1] += 1
        return real(xp, a, b)

    monkeypatch.setattr(linalg, "matmul", counted)
    clear_caches()
    spec = RunSpec.make("matmul", {"n": n}, backend="torch", repeat=8, warmup=1, threads=1)
    r, base = run_pair(
        spec, baseline_spec(spec), on_phase=lambda name, _d: checks.append(0) if name == "check" else None
    )
    assert base is not None and "alloc_cold_probe" in base.conditions, base.conditions
    assert base.check_ok and r.check_ok
    assert checks[-1] == 0, "the baseline's check called its step once more beside the probe's output"
