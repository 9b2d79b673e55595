"""Cross-version verdicts (`gpuplay compare --from a.json b.json`, `load(a).compare(load(b))`) that
hold: one median everywhere, intervals that say whether they hold run-to-run variation, samples of
one kind only, a new CPU named as a difference, an empty side named."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

import gpuplay
from gpuplay.cli import main
from gpuplay.core.reports import crossversion as cv
from tests.unit.test_api import _result, _write


def _d(scenario, samples, **cond):
    r = _result(scenario, samples)
    r.conditions.update(cond)
    return r.to_dict()


def test_the_median_printed_is_the_median_divided():
    """[1, 1, 2, 2] printed 2.0 (the upper-middle sample) beside a ratio from 1.5."""
    (c,) = cv.compare_results([_d("a", [1.0, 1.0, 2.0, 2.0])], [_d("a", [3.0, 3.0, 3.0, 3.0])])
    assert c.old_median == 1.5 and c.new_median == 3.0 and c.ratio == c.new_median / c.old_median == 2.0
    assert "1.5 s → 3 s" in c.text()


def test_one_run_a_side_is_within_run_only_and_a_3_percent_drift_is_not_slower(tmp_path):
    """Thousands of samples make a within-run interval ±0.1 %: a 3 % drift between two runs of the
    same code read "slower". Now: within noise, said to rest on one run a side."""
    rng = np.random.default_rng(5)
    old = [_d("a", list(1e-3 * np.exp(rng.normal(0, 0.01, 5000))))]
    new = [_d("a", list(1.03e-3 * np.exp(rng.normal(0, 0.01, 5000))))]
    (c,) = cv.compare_results(old, new)
    assert c.low is not None and c.low > 1.0  # the within-run interval excludes 1 ...
    assert c.verdict == "within noise" and c.interval == cv.WITHIN_RUN  # ... and is not taken for more
    assert "one run a side" in c.note and c.to_dict()["interval_kind"] == "within-run only"
    a = _write(tmp_path / "a.json", [_result("a", old[0]["samples_s"])])
    b = _write(tmp_path / "b.json", [_result("a", new[0]["samples_s"])])
    cmp = gpuplay.load(a).compare(gpuplay.load(b))
    assert cmp.notes == [cv.WITHIN_RUN_NOTE] and "within-run only" in cmp.text()
    res = CliRunner().invoke(main, ["compare", "--from", str(a), str(b)])
    assert res.exit_code == 0 and "within-run only" in " ".join(res.output.split())


def test_several_runs_a_side_give_an_interval_across_runs():
    rng = np.random.default_rng(6)

    def runs(scale, drifts):
        return [_d("a", list(scale * d * 1e-3 * np.exp(rng.normal(0, 0.01, 2000)))) for d in drifts]

    same = cv.compare_results(runs(1.0, (1.0, 1.03, 0.98)), runs(1.0, (1.01, 0.97, 1.04)))
    (c,) = same
    assert c.runs == (3, 3) and c.interval == cv.ACROSS_RUNS and c.verdict == "within noise"
    assert c.high - c.low > 0.02  # the run-to-run drift is in it (a within-run one is ~0.002 wide)
    (c,) = cv.compare_results(runs(1.0, (1.0, 1.02, 0.99)), runs(1.3, (1.0, 1.02, 0.99)))
    assert c.verdict == "slower" and 1.2 < c.ratio < 1.4


def test_paired_samples_are_never_compared_with_single_steps():
    paired = _d("a", [1e-3] * 20, paired_with="numpy cpu float64")
    single = _d("a", [2e-3] * 20)
    (c,) = cv.compare_results([paired], [single])
    assert c.verdict == "not compared" and c.ratio is None
    assert cv.PAIR_MEANS in c.note and cv.SINGLE_STEPS in c.note
    (c,) = cv.compare_results([paired, single], [_d("a", [2e-3] * 20)])  # a kind both have: that one
    assert c.kind == cv.SINGLE_STEPS and c.ratio == 1.0


def test_a_new_cpu_is_named_beside_the_versions(tmp_path):
    a = _write(tmp_path / "a.json", [_result("a", [1e-3] * 20)])
    b = _write(tmp_path / "b.json", [_result("a", [0.5e-3] * 20)])
    for path, cpu in ((a, "AMD EPYC 7B13"), (b, "Intel Xeon Platinum 8480")):
        doc = json.loads(path.read_text())
        doc["environment"]["cpu"] = cpu
        for r in doc["results"]:
            r["conditions"]["device_name"] = cpu
        path.write_text(json.dumps(doc))
    cmp = gpuplay.load(a).compare(gpuplay.load(b))
    assert ("CPU", "AMD EPYC 7B13", "Intel Xeon Platinum 8480") in cmp.versions
    assert "the same in both" not in cmp.text()
    res = CliRunner().invoke(main, ["compare", "--from", str(a), str(b)])
    out = " ".join(res.output.split())
    assert "CPU AMD EPYC 7B13 → Intel Xeon Platinum 8480" in out and "the same in both files" not in out


def test_an_empty_side_is_named_not_dropped(tmp_path):
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    failed = RunResult(spec=RunSpec.make("matmul", {"n": 64}, scenario="a", backend="numpy"), status="failed",
                       message="MemoryError: out of host memory", size="64×64")  # fmt: skip
    a = _write(tmp_path / "a.json", [_result("a", [1e-3] * 20)])
    b = _write(tmp_path / "b.json", [failed])
    cmp = gpuplay.load(a).compare(gpuplay.load(b))
    (c,) = cmp.changes
    assert c.verdict == "not compared" and "the new file has no timed samples for it" in c.note
    assert "failed: MemoryError" in c.note
    res = CliRunner().invoke(main, ["compare", "--from", str(a), str(b)])
    assert res.exit_code == 0, res.output
    assert "the new file has no timed samples for it" in " ".join(res.output.split())
    res = CliRunner().invoke(main, ["compare", "--from", str(a), str(b), "--format", "json"])
    (change,) = json.loads(res.stdout)["across_versions"]["changes"]
    assert change["verdict"] == "not compared" and change["ratio"] is None
