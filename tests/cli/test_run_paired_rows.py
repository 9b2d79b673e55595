"""`gpuplay run -b torch --baseline`: one paired measurement gives both rows."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpuplay.cli import main


def test_run_with_a_baseline_takes_numpys_row_from_the_pairs_and_never_times_it_alone(monkeypatch):
    import gpuplay.core.runner as runner

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    alone: list[str] = []
    real = runner.run

    def counted(spec, *a, **kw):
        alone.append(spec.label())
        return real(spec, *a, **kw)

    monkeypatch.setattr(runner, "run", counted)
    args = ["run", "matmul", "-s", "n=64", "--repeat", "6", "-b", "torch", "--threads", "1", "--baseline"]
    res = CliRunner().invoke(main, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert alone == [], "NumPy's row is the baseline side of the pairs, not a measurement of its own"
    numpy_row, torch_row = json.loads(res.stdout)["results"]
    assert numpy_row["spec"]["backend"] == "numpy" and torch_row["spec"]["backend"] == "torch"
    assert numpy_row["summary"]["n"] == 6 == torch_row["speedup"]["pairs"] and numpy_row["check_ok"] is True
    assert numpy_row["conditions"]["timed"].startswith("interleaved: 6 ABBA pairs with torch cpu float32")
    assert torch_row["speedup"]["baseline_median_s"] == numpy_row["summary"]["median"]


def test_run_measures_numpy_alone_when_the_pairs_gave_no_row(monkeypatch):
    import gpuplay.core.runner.measure as measure

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    # The torch configuration is refused by its own preflight (one step over the limit) before any
    # pair: NumPy's row is then measured alone, as before the pairing, and the run exits 1.
    # The step estimates are set, not timed: timed ones at a 1 ms limit swing both sides of it on
    # a loaded machine (NumPy's was once 2 ms and refused too).
    real = measure.estimate_step_seconds

    def estimate(plan, timer, limit_s, cancel):
        real(plan, timer, limit_s, cancel)  # the probes still run, as they would
        return 1e-4 if plan.spec.backend == "numpy" else 10.0

    monkeypatch.setattr(measure, "estimate_step_seconds", estimate)
    args = [
        "run",
        "matmul",
        "-s",
        "n=512",
        "--repeat",
        "3",
        "-b",
        "torch",
        "--baseline",
        "--max-step",
        "0.001",
    ]
    res = CliRunner().invoke(main, [*args, "--format", "json"])
    rows = json.loads(res.stdout)["results"]
    assert [(r["spec"]["backend"], r["status"]) for r in rows][1] == ("torch", "refused"), res.output
    assert rows[0]["spec"]["backend"] == "numpy" and "timed" not in rows[0]["conditions"]
