"""`gpuplay run --profile/--trace` and the new scenarios, headless, on real PyTorch (CPU)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

TINY = ["--warmup", "1", "--repeat", "2"]


def test_run_profile_prints_ops_and_writes_a_chrome_trace(tmp_path):
    trace = tmp_path / "fused.json"
    res = CliRunner().invoke(
        main, ["run", "fused", "-b", "torch", "-s", "n=2000", *TINY, "--profile", "--trace", str(trace)]
    )
    assert res.exit_code == 0, res.output
    assert "Profile torch cpu float32" in res.stdout and "aten::tanh" in res.stdout
    assert "9 operator calls" in res.stdout
    assert json.loads(trace.read_text())["traceEvents"]


def test_run_profile_json_is_a_separate_document():
    res = CliRunner().invoke(
        main, ["run", "fused", "-b", "torch", "-s", "n=2000", *TINY, "--profile", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    last = json.loads(res.stdout.strip().splitlines()[-1])
    assert last["profile"]["status"] == "ok" and last["profile"]["kernels_per_step"] == 9


def test_run_profile_on_numpy_exits_1_with_the_reason():
    res = CliRunner().invoke(main, ["run", "fused", "-s", "n=2000", *TINY, "--profile"])
    assert res.exit_code == 1
    assert "cProfile" in res.stderr


def test_refused_attention_backend_exits_1_with_torchs_reason():
    res = CliRunner().invoke(
        main, ["run", "attention", "-b", "torch", "-s", "sdpa=efficient", "-s", "seq=32", *TINY]
    )
    assert res.exit_code == 1 and "No viable backend" in res.stderr


def test_a_runtime_without_b_runs_on_torch_and_says_so_and_an_explicit_b_stays():
    """`-s runtime=…` needs the torch model: without -b the run takes torch (the choice made in
    core.scenarios.on_needed_backend, shared with gpuplay.run) and says so; -b numpy is refused."""
    small = ["-s", "runtime=torchscript", "-s", "batch=2", "-s", "seq=8", "-s", "width=32", "-s", "heads=4"]
    res = CliRunner().invoke(main, ["run", "inference", *small, *TINY, "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "backend torch: these parameters run on torch" in res.stderr
    assert json.loads(res.stdout)["results"][0]["spec"]["backend"] == "torch"
    res = CliRunner().invoke(main, ["run", "inference", "-b", "numpy", *small, *TINY])
    assert res.exit_code == 1 and "use backend torch" in res.output, res.output


@pytest.mark.real_engine
def test_a_runtime_without_b_is_measured_through_the_engine_with_its_baseline(tmp_path):
    """Through the engine process, as users run it: the engine's probe must cover the backend the
    parameters switched to (torch), not only the -b default's (the run was refused 'PyTorch is still
    being probed' with --baseline)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    env["GPUPLAY_STATE_DIR"] = str(tmp_path / "state")
    small = ["-s", "runtime=torchscript", "-s", "batch=2", "-s", "seq=8", "-s", "width=32", "-s", "heads=4"]
    cmd = [
        sys.executable,
        "-m",
        "gpuplay",
        "run",
        "inference",
        *small,
        *TINY,
        "--baseline",
        "--format",
        "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL, env=env)
    assert proc.returncode == 0, proc.stderr
    labels = [r["label"] for r in json.loads(proc.stdout)["results"]]
    assert labels == ["numpy cpu float32", "torch cpu float32 +torchscript"], labels
