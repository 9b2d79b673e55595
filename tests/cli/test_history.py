"""`gpuplay history`: every measurement, speedups within a session only, readable at 80 columns."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.reports.sessionlog import SessionLog, sessions_dir
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec


def _result(workload: str, params: dict, backend: str, seconds: float, size: str) -> RunResult:
    spec = RunSpec.make(workload, params, scenario=workload, backend=backend)
    return RunResult(spec=spec, samples=[seconds] * 5, size=size, conditions={"backend": backend})


def _session(name: str, numpy_s: float, torch_s: float) -> None:
    log = SessionLog(sessions_dir())
    log.path = log.directory / f"session-{name}.jsonl"
    for r in (
        _result("matmul", {"n": 64}, "numpy", numpy_s, "64×64"),
        _result("matmul", {"n": 64}, "torch", torch_s, "64×64"),
        _result("autograd", {"n": 6, "method": "auto"}, "numpy", 0.01, "6² = 36 components"),
        _result("autograd", {"n": 6, "method": "autograd"}, "torch", 0.0001, "6² = 36 components"),
    ):
        assert log.append(r)


def test_speedups_pair_within_a_session_and_numpy_rows_are_1x():
    _session("20260101-000000-1", numpy_s=0.010, torch_s=0.005)
    _session("20260102-000000-2", numpy_s=0.030, torch_s=0.010)
    res = CliRunner().invoke(main, ["history", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["results"]
    assert len(rows) == 8  # every measurement by default
    speedups = [(r["spec"]["backend"], r["workload"], r["speedup_vs_numpy_cpu"]) for r in rows]
    assert speedups == [
        ("numpy", "matmul", 1.0),
        ("torch", "matmul", 2.0),  # 10 ms / 5 ms in its own session, not 30 ms / 5 ms
        ("numpy", "autograd", 1.0),
        ("torch", "autograd", 100.0),
        ("numpy", "matmul", 1.0),  # not 0.33× against the first session's NumPy row
        ("torch", "matmul", 3.0),
        ("numpy", "autograd", 1.0),
        ("torch", "autograd", 100.0),
    ]


def test_header_says_what_is_shown_and_markers_stay_on_their_rows():
    _session("20260101-000000-1", numpy_s=0.010, torch_s=0.005)
    _session("20260102-000000-2", numpy_s=0.030, torch_s=0.010)
    res = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["history"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert "history: all 8 measurements, 2 sessions" in lines[0]
    assert max(len(x) for x in lines) <= 80
    # The autograd rows carry a note: its marker sits on the row, never on a line of its own.
    assert not any(x.strip().startswith("[") and x.strip().endswith("]") for x in lines)
    marked = [x for x in lines if ("[4]" in x or "[8]" in x) and not x.startswith("[")]
    assert len(marked) == 2 and all("100×" in x for x in marked)
    assert any(x.startswith("[4] algorithms differ") for x in lines)
    res = CliRunner(env={"COLUMNS": "80"}).invoke(main, ["history", "--limit", "3"])
    assert "history: 3 of 8 measurements, 1 session" in res.stdout.splitlines()[0]


def test_a_numpy_row_is_its_own_baseline_even_when_measured_twice():
    from gpuplay.core.studies.compare import attach_baselines

    first = _result("matmul", {"n": 64}, "numpy", 0.010, "64×64")
    again = _result("matmul", {"n": 64}, "numpy", 0.020, "64×64")
    assert [row.speedup for row in attach_baselines([first, again])] == [1.0, 1.0]


def test_a_run_logged_before_calibrating_is_placed_against_the_calibration_made_since():
    from gpuplay.core.measure import roofline
    from tests.unit.test_roofline import cpu_name, peaks

    log = SessionLog(sessions_dir())
    r = _result("matmul", {"n": 1024}, "numpy", 0.05, "1024×1024")
    r.flops, r.bytes = 2 * 1024**3, 3 * 4 * 1024**2
    r.conditions["device_name"] = cpu_name()  # what a run on this machine records
    r.roof = {"status": "not calibrated", "note": roofline.NOT_CALIBRATED}  # as a run stamps it
    assert log.append(r)
    before = CliRunner().invoke(main, ["history"])
    assert "not calibrated" in before.output
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=200.0))
    after = CliRunner().invoke(main, ["history", "--format", "json"])
    assert after.exit_code == 0, after.output
    rows = json.loads(after.stdout)["results"]
    assert all(r["roof"]["status"] != "not calibrated" for r in rows if r["workload"] == "matmul")
    table = CliRunner().invoke(main, ["history"])
    assert "not calibrated" not in table.output


@pytest.mark.parametrize("command", [["history"], ["list"], ["info"]])
def test_a_reader_that_leaves_early_ends_the_command_quietly(command, tmp_path):
    """`gpuplay history | head -1`: the pipe closes before the table is written; like `git log |
    head`, that is no error: exit 0, no traceback, no error line."""
    import os
    import subprocess
    import sys

    _session("20260101-000000-1", numpy_s=0.010, torch_s=0.005)
    env = {**os.environ, "GPUPLAY_IN_PROCESS": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "gpuplay", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    p.stdout.close()  # the reader is gone before the command writes its first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert err == ""


def test_the_footer_names_each_workloads_reference():
    log = SessionLog(sessions_dir())
    assert log.append(_result("matmul", {"n": 64}, "numpy", 0.01, "64×64"))
    one = " ".join(CliRunner().invoke(main, ["history"]).stdout.split())
    assert "error vs float64 NumPy" in one
    assert log.append(_result("inference", {"batch": 1}, "torch", 0.01, "batch 1"))
    both = " ".join(CliRunner().invoke(main, ["history"]).stdout.split())
    # inference is checked against its float32 forward pass, not float64 NumPy
    assert "error vs float64 NumPy (inference: the float32 forward pass)" in both
    log.path.unlink()
    assert log.append(_result("inference", {"batch": 1}, "torch", 0.01, "batch 1"))
    alone = " ".join(CliRunner().invoke(main, ["history"]).stdout.split())
    assert "error vs the float32 forward pass" in alone and "float64" not in alone


def test_the_dataloader_split_is_shares_of_the_step_and_adds_up_to_it():
    # As seen on a real run: wait 104 ms + model 73.8 ms inside a 259 ms median step. Shares of the
    # phases' sum (58 % + 41 %) hid the 81 ms nothing accounted for; of the step, with "other", they add up.
    r = _result("dataloader", {"batch": 2}, "torch", 0.259, "2×32² JPEG")
    r.split = {"data_wait_s": [0.104] * 5, "h2d_s": [0.0] * 5, "model_s": [0.0738] * 5}
    assert SessionLog(sessions_dir()).append(r)
    res = CliRunner().invoke(main, ["history"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "data wait 104 ms (40 %)" in out and "model 73.8 ms (28 %)" in out
    assert "other 81.2 ms (31 %)" in out
    assert "bottleneck" not in out  # the model waits 40 % of the step, not 58 %
