"""`gpuplay sweep` on real NumPy and PyTorch (tiny sizes and budgets), its formats and bad input."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.reports.sessionlog import read_log

FAST = ["--budget", "0.01", "--warmup", "1", "--threads", "1"]


@pytest.fixture
def cli():
    return CliRunner()


def test_real_cpu_sweep_json_has_every_point_fit_and_crossover(cli, tmp_path):
    res = cli.invoke(
        main,
        ["sweep", "matmul", "--over", "n=16..64", "--backends", "numpy,torch", "--format", "json", *FAST],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    sweep = doc["sweep"]
    assert sweep["param"] == "n" and sweep["values"] == [16, 32, 64]
    assert [s["label"] for s in sweep["series"]] == ["numpy cpu float32", "torch cpu float32"]
    for s in sweep["series"]:
        assert [p["value"] for p in s["points"]] == [16, 32, 64]
        assert all(p["status"] == "ok" and p["median"] > 0 for p in s["points"])
        assert all(p["low"] <= p["median"] <= p["high"] for p in s["points"])
        assert s["fit"]["unit"] == "GFLOP/s" and s["fit"]["floor_s"] >= 0
    (c,) = sweep["crossovers"]
    assert {c["faster"], c["slower"]} == {"numpy cpu float32", "torch cpu float32"}
    assert c["reason"] and (c["at"] is None or 16 <= c["at"] <= 64)
    # every point went to the session log, like any run
    logs = list((tmp_path / "state" / "sessions").glob("*.jsonl"))
    assert sum(len(list(read_log(p))) for p in logs) == 6


def test_table_markdown_and_csv(cli, tmp_path):
    args = [
        "sweep",
        "matmul",
        "--over",
        "n=16,32",
        "--backends",
        "numpy",
        "--dtypes",
        "float32,float64",
        *FAST,
    ]
    res = cli.invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "numpy cpu float64" in res.stdout and "floor" in res.stdout and "crossover" in res.stdout
    out = tmp_path / "s.md"
    res = cli.invoke(main, [*args, "--format", "markdown", "--out", str(out)])
    assert res.exit_code == 0 and "| n | numpy cpu float32 | numpy cpu float64 |" in out.read_text()
    res = cli.invoke(main, [*args, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == 4 and {r["dtype"] for r in rows} == {"float32", "float64"}


@pytest.mark.parametrize(
    "over, words",
    [
        ("m=16..64", "no parameter 'm'"),
        ("n=64..16", "below its start"),
        ("n=nan", "finite"),
        ("n", "PARAM="),
        ("n=1,2", "n must be >= 2"),
    ],
)
def test_bad_usage_exits_2_with_the_reason(cli, over, words):
    res = cli.invoke(main, ["sweep", "matmul", "--over", over, *FAST])
    assert res.exit_code == 2, res.output
    assert words in res.output


def test_unknown_backend_and_scenario_exit_2(cli):
    res = cli.invoke(main, ["sweep", "matmul", "--over", "n=16", "--backends", "jax"])
    assert res.exit_code == 2 and "jax" in res.output
    res = cli.invoke(main, ["sweep", "nosuch", "--over", "n=16"])
    assert res.exit_code == 2 and "nosuch" in res.output


def test_unavailable_configurations_are_refused_with_their_reason(cli):
    res = cli.invoke(main, ["sweep", "matmul", "--over", "n=16", "--backends", "cupy", "-d", "cuda", *FAST])
    assert res.exit_code == 1
    assert "refused cupy" in res.stderr and "nothing to sweep" in res.stderr


def test_a_series_stops_at_the_first_refused_size(cli):
    # A step limit far below a 1024² matmul: torch is stopped there, and says why.
    res = cli.invoke(
        main,
        ["sweep", "matmul", "--over", "n=8,1024", "--backends", "torch", "--max-step", "0.001",
         "--format", "json", *FAST[:-2]],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    (s,) = json.loads(res.stdout)["sweep"]["series"]
    assert s["points"][-1]["status"] == "refused"
    assert s["stopped"].startswith("stopped at n=")


def test_compare_from_merges_sweep_files(cli, tmp_path):
    files = []
    for name in ("box1.json", "box2.json"):
        path = tmp_path / name
        res = cli.invoke(main, ["sweep", "matmul", "--over", "n=16,32", "--backends", "numpy",
                                "--format", "json", "--out", str(path), *FAST])  # fmt: skip
        assert res.exit_code == 0, res.output
        files.append(str(path))
    res = cli.invoke(main, ["compare", "--from", *files])
    assert res.exit_code == 0, res.output
    assert "box1: numpy cpu float32" in res.stdout and "box2: numpy cpu float32" in res.stdout
    res = cli.invoke(main, ["compare", "--from", *files, "--format", "json"])
    assert len(json.loads(res.stdout)["sweep"]["series"]) == 2


@pytest.mark.real_engine
def test_progress_json_lines_through_the_real_engine(tmp_path):
    cmd = [sys.executable, "-m", "gpuplay", "sweep", "matmul", "--over", "n=16,32", "--backends", "numpy",
           "--format", "json", "--progress-json", *FAST]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(x) for x in proc.stderr.splitlines() if x.startswith("{")]
    assert events[0]["plan"]["values"] == [16, 32]
    assert [e["point"]["value"] for e in events[1:]] == [16, 32]
    assert json.loads(proc.stdout)["sweep"]["series"][0]["points"][1]["value"] == 32


@pytest.mark.slow
@pytest.mark.real_engine
def test_ctrl_c_prints_the_finished_points_and_exits_130(tmp_path):
    import os
    import signal
    import time

    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    env |= {"GPUPLAY_STATE_DIR": str(state), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gpuplay", "sweep", "matmul", "--over", "n=16..1024", "--backends", "numpy",
           "--budget", "1", "--format", "json"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while sum(len(list(read_log(p))) for p in state.glob("sessions/*.jsonl")) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "never logged two points"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    sweep = json.loads(out)["sweep"]
    points = sweep["series"][0]["points"]
    assert sweep["interrupted"] is True and 2 <= len(points) < len(sweep["values"])
    assert all(p["status"] == "ok" for p in points)
    assert "interrupted by SIGINT" in err


def test_a_one_point_range_is_one_point(cli):
    """`--over n=64..64` narrows a sweep to one size: measured, not refused."""
    res = cli.invoke(main, ["sweep", "matmul", "--over", "n=64..64", "--backends", "numpy", *FAST,
                            "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)["sweep"]
    assert [(p["value"], p["status"]) for s in doc["series"] for p in s["points"]] == [(64, "ok")], doc


def test_the_footer_names_the_reference_the_workload_is_checked_against(cli):
    res = cli.invoke(main, ["sweep", "inference", "--over", "batch=1,2", "--backends", "torch", *FAST])
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())
    assert "checked against the float32 forward pass" in out and "float64" not in out
