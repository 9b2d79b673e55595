"""What the report commands print: merged sweeps keep their machines; a sweep and a run result are not
mixed into one table; the paired speedup says where it comes from; notes computed are printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpuplay.core.sweepreport import document, is_sweep_file, machine_text, merge_sweeps, to_markdown


def gpuplay(*args: str, cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})  # fmt: skip


# -- merged sweeps -----------------------------------------------------------------------------
def _sweep_file(path, cpu: str, cores: int):
    point = {"value": 16, "status": "ok", "median": 1e-3, "low": 9e-4, "high": 1.1e-3}
    sweep = {"scenario": "matmul", "param": "n", "values": [16],
             "series": [{"label": "numpy cpu float32", "points": [point]}]}  # fmt: skip
    path.write_text(json.dumps(document(sweep, {"cpu": cpu, "cores": cores})))
    return path


def test_merged_sweeps_keep_their_machines(tmp_path):
    a = _sweep_file(tmp_path / "sw.json", "Xeon A", 8)
    b = _sweep_file(tmp_path / "sw2.json", "Epyc B", 64)
    proc = gpuplay("compare", "--from", str(a), str(b), cwd=tmp_path, env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "sw: Xeon A (8 cores); sw2: Epyc B (64 cores)" in proc.stdout
    assert "?" not in proc.stdout.split("medians after warm-up")[0].splitlines()[-1]
    md = gpuplay("compare", "--from", str(a), str(b), "--format", "markdown", cwd=tmp_path)
    assert "Machines: sw: Xeon A (8 cores); sw2: Epyc B (64 cores)." in md.stdout


def test_one_machine_is_said_once():
    env = {"cpu": "Xeon A", "cores": 8}
    assert machine_text({"environments": {"a": env, "b": env}}) == "Xeon A (8 cores)"
    assert machine_text({"environment": env}) == "Xeon A (8 cores)"
    merged = merge_sweeps([{"sweep": {"scenario": "m", "param": "n", "series": []}}], ["a"])
    assert "Machines: Xeon A (8 cores)." in to_markdown(merged, "Xeon A (8 cores)")


def test_a_sweep_and_a_run_result_cannot_share_a_table(tmp_path):
    sweep = _sweep_file(tmp_path / "sw.json", "Xeon A", 8)
    (tmp_path / "run.json").write_text(json.dumps({"environment": {}, "results": []}))
    assert is_sweep_file(sweep) and not is_sweep_file(tmp_path / "run.json")
    proc = gpuplay("compare", "--from", "sw.json", "run.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert (
        "sw.json is a sweep and run.json a run result: sweeps and run results cannot be merged" in proc.stderr
    )
    assert "not a gpuplay result file" not in proc.stderr


# -- notes computed are printed ----------------------------------------------------------------
def test_the_half_precision_note_is_printed():
    from gpuplay.core.compare import attach_baselines
    from gpuplay.core.report import row_cells
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    note = "float16 is emulated and slow on this CPU: calibrated matmul 3 GFLOP/s vs float32 300 (0.01×)"
    spec = RunSpec(workload="matmul", scenario="matmul", backend="torch", device="cpu", dtype="float16")
    (row,) = attach_baselines([RunResult(spec, samples=[1e-3] * 5, notes=[note])])
    assert note in row_cells(row)[-1]
