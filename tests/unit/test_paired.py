"""Paired, interleaved speedups: the statistics, the ABBA loop, the runner, the engine, the rows."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from gpuplay.core.compare import Row, baseline_spec, run_compare
from gpuplay.core.report import row_cells, to_csv, to_json
from gpuplay.core.result import RunResult
from gpuplay.core.runner.paired import interleave, run_paired
from gpuplay.core.spec import RunSpec
from gpuplay.core.stats import PairedSpeedup, paired_speedup


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

    def fake(spec, *, cancel=None, telemetry=None, paired_with=None):
        calls.append((spec.backend, paired_with.backend if paired_with else None))
        return RunResult(spec=spec, samples=[0.01] * 3)

    spec = RunSpec.make("matmul", {"n": 32}, backend="torch")
    run_compare([baseline_spec(spec), spec], measure=fake)
    assert calls == [("numpy", None), ("torch", "numpy")]


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

    counts = iter([0, 6 * 5000])  # getrusage before and after the pairs
    monkeypatch.setattr(paired_module, "minor_faults", lambda: next(counts))
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", repeat=6, threads=1)
    r = run_paired(spec, baseline_spec(spec))
    assert r.conditions["page_faults_per_pair"] == 5000
    assert any(n.startswith("allocation-bound pairs: 5,000 page faults per pair") for n in r.notes)
