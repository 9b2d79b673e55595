"""`gpuplay run --profile/--trace` and the new scenarios, headless, on real PyTorch (CPU)."""

from __future__ import annotations

import json

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
