"""A stored roof that a run exceeds is stale, never a fraction over 100 %: through `gpuplay run
--format json` in a subprocess with its own state folder, and in every other place a roof is shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.measure import roofline
from gpuplay.core.result import RunResult
from tests.unit.test_roofline import peaks


def _run_json(tmp_path, *args: str) -> dict:
    env = {
        **os.environ,
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "GPUPLAY_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    env.pop("COLUMNS", None)
    proc = subprocess.run([sys.executable, "-m", "gpuplay", "run", *args, "--format", "json"], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (r,) = json.loads(proc.stdout)["results"]
    return r


def test_a_run_above_a_deliberately_low_stored_roof_reads_stale_not_over_100_percent(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    roofline.save_peaks(peaks("cpu", bw=0.001, f32=0.001))  # far below anything a run reaches
    r = _run_json(tmp_path, "matmul", "-s", "n=64", "--budget", "0.05", "--repeat", "3")
    roof = r["roof"]
    assert roof["status"] == "stale" and roof["status"] != "ok"
    assert roof["fraction"] is None and roof["above_roof"] > 1
    assert "rerun gpuplay calibrate" in roof["note"]


def test_a_run_under_its_stored_roof_is_a_fraction_of_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    roofline.save_peaks(peaks("cpu", bw=1e6, f32=1e9))
    roof = _run_json(tmp_path, "matmul", "-s", "n=64", "--budget", "0.05", "--repeat", "3")["roof"]
    assert roof["status"] == "ok" and 0 < roof["fraction"] <= 1


def test_a_stale_roof_reads_stale_in_the_table_and_csv_with_the_advice():
    roofline.save_peaks(peaks("cpu", bw=0.001, f32=0.001))
    args = ["run", "matmul", "-s", "n=64", "--budget", "0.05", "--repeat", "3"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "stale" in res.stdout and "rerun gpuplay calibrate" in " ".join(res.stdout.split())
    assert "%" not in next(line for line in res.stdout.splitlines() if "numpy cpu" in line).split()[-1]
    res = CliRunner().invoke(main, [*args, "--format", "csv"])
    import csv
    import io

    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert row["roof_status"] == "stale" and row["roof_fraction"] == ""


def test_a_result_file_with_an_ok_roof_over_1_is_read_as_stale():
    """A file written before the rule (status ok, fraction 1.5) is not shown as 150 %."""
    from gpuplay.core.spec import RunSpec

    r = RunResult(spec=RunSpec(workload="matmul", backend="numpy"), status="ok", samples=[0.01])
    r.roof = {"status": "ok", "bound": "compute", "fraction": 1.5, "calibrated_at": "then", "note": ""}
    roof = r.roof_fields()
    assert roof["status"] == "stale" and roof["fraction"] is None and roof["above_roof"] == 1.5
    assert roofline.roof_cell(roof) == "stale"


def test_a_sweep_point_above_its_stored_roof_is_stale_with_no_fraction():
    roofline.save_peaks(peaks("cpu", bw=0.001, f32=0.001))
    res = CliRunner().invoke(main, ["sweep", "matmul", "--over", "n=16,32", "--backends", "numpy",
                                    "--budget", "0.05", "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (s,) = json.loads(res.stdout)["sweep"]["series"]
    assert all(p["roof_status"] == "stale" and p["roof_fraction"] is None for p in s["points"])
