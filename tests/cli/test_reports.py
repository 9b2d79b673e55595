"""What the report commands print: merged sweeps keep their machines; a sweep and a run result are not
mixed into one table; the paired speedup says where it comes from; notes computed are printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpuplay.core.reports.sweepreport import document, is_sweep_file, machine_text, merge_sweeps, to_markdown


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


# -- the paired speedup says where it comes from --------------------------------------------
def _paired_rows():
    """A torch row paired with NumPy in interleaved pairs (NumPy ~270 ms there, torch ~297 ms) and
    NumPy's own row measured apart at ~166 ms: the rows' ratio (0.56×) is not the pairs' (0.9×)."""
    import random

    from gpuplay.core.measure.stats import paired_speedup
    from gpuplay.core.result import RunResult
    from gpuplay.core.runner.paired import speedup_record
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.studies.compare import attach_baselines

    rng = random.Random(1)
    numpy_spec = RunSpec(workload="matmul", scenario="matmul", backend="numpy", device="cpu")
    torch_spec = RunSpec(workload="matmul", scenario="matmul", backend="torch", device="cpu")
    base_apart = RunResult(numpy_spec, samples=[0.166 * rng.uniform(0.99, 1.01) for _ in range(21)])
    base_pairs = RunResult(numpy_spec, samples=[0.270 * rng.uniform(0.97, 1.03) for _ in range(21)])
    torch = RunResult(torch_spec, samples=[0.297 * rng.uniform(0.97, 1.03) for _ in range(21)])
    torch.speedup = speedup_record(paired_speedup(base_pairs.samples, torch.samples), base_pairs)
    return attach_baselines([base_apart, torch])


def test_the_pairs_medians_stand_beside_a_speedup_the_rows_would_contradict():
    import re

    from gpuplay.core.reports.report import row_cells, to_markdown

    _, row = _paired_rows()
    notes = row_cells(row)[-1]
    m = re.search(
        r"speedup from (\d+) interleaved pairs: NumPy ([\d.]+) ms vs ([\d.]+) ms in the pairs", notes
    )
    assert m, notes
    assert int(m[1]) == row.speedup_pairs == 21
    base_ms, cand_ms = float(m[2]), float(m[3])
    low, high = row.speedup_interval
    assert low <= base_ms / cand_ms <= high  # the medians shown reproduce the speedup printed
    assert not low <= row.baseline.median / row.result.median <= high  # which the rows' medians do not
    assert "the rows' medians were measured apart" in to_markdown([row])


def test_no_pairs_note_when_the_rows_agree_with_the_pairs():
    from gpuplay.core.reports.report import row_cells

    base, row = _paired_rows()
    base.result.samples = [row.result.speedup["baseline_median_s"]] * 21  # as in the pairs
    assert "interleaved pairs" not in row_cells(row)[-1]


def test_the_terminal_table_prints_the_pairs_note(capsys, monkeypatch):
    from gpuplay.cli.output import print_rows

    monkeypatch.setenv("COLUMNS", "200")
    print_rows(_paired_rows(), "table", None)
    out = " ".join(capsys.readouterr().out.split())
    assert "[2] speedup from 21 interleaved pairs: NumPy 2" in out
    assert "in the pairs (the rows' medians were measured apart)" in out


# -- notes computed are printed ----------------------------------------------------------------
def test_the_half_precision_note_is_printed():
    from gpuplay.core.reports.report import row_cells
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.studies.compare import attach_baselines

    note = "float16 is emulated and slow on this CPU: calibrated matmul 3 GFLOP/s vs float32 300 (0.01×)"
    spec = RunSpec(workload="matmul", scenario="matmul", backend="torch", device="cpu", dtype="float16")
    (row,) = attach_baselines([RunResult(spec, samples=[1e-3] * 5, notes=[note])])
    assert note in row_cells(row)[-1]
