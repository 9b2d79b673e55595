"""A step limit that limits: a step past `--max-step` is stopped at the limit (plus a short
grace) or refused by the estimate, never reported as a normal result; the headless run exits 1
and says so. Real `gpuplay run` subprocesses with the engine process, as users run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

SLEEPS_AT_FULL_SIZE = '''"""Sleeps {sleep} s a step at its full size only: no estimate at smaller sizes can foresee it."""
import time

PARAMS = {{"n": 1000}}


def inputs(rng, n):
    return rng.standard_normal(n)


def step(xp, x):
    if x.shape[0] >= 1000:
        time.sleep({sleep})
    return x * 2
'''


def _code(tmp_path: Path, sleep: float) -> Path:
    path = tmp_path / "sleepy.py"
    path.write_text(SLEEPS_AT_FULL_SIZE.format(sleep=sleep))
    return path


def _gpuplay(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "GPUPLAY_CONFIG_DIR": str(tmp_path / "cfg"),
    }
    env.pop("GPUPLAY_IN_PROCESS", None)
    env.pop("COLUMNS", None)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "gpuplay", *args], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    return proc, time.monotonic() - t0


@pytest.mark.slow
def test_a_step_no_estimate_foresees_is_stopped_at_its_limit_and_exits_1(tmp_path):
    """Was: a 3 s median, exit 0, after 12 s. Now stopped ~1.4 s into the step."""
    proc, took = _gpuplay(tmp_path, "run", str(_code(tmp_path, 3)), "--max-step", "1", "--repeat", "2",
                          "--warmup", "0")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "stopped: a step ran past its limit of 1 s (--max-step)" in proc.stderr
    assert "choose a smaller size, or raise the step limit" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr
    assert took < 8, f"{took:.1f} s (engine start and a 1.4 s stop, on a loaded machine)"
    proc, _ = _gpuplay(tmp_path, "run", str(_code(tmp_path, 3)), "--max-step", "1", "--repeat", "2",
                       "--warmup", "0", "--format", "json")  # fmt: skip
    (r,) = json.loads(proc.stdout)["results"]
    assert r["status"] == "failed" and r["failure"] == "step-timeout" and not r["summary"]


@pytest.mark.slow
def test_emulated_float16_under_a_1_s_limit_is_refused_or_stopped(tmp_path):
    """Was: a 2.19 s median, exit 0, nothing about the limit. Where the CPU runs float16 matmul
    fast this configuration fits the limit: then no step reported may be over it."""
    proc, took = _gpuplay(tmp_path, "run", "matmul", "-b", "torch", "--dtype", "float16", "-p", "quick",
                          "--max-step", "1", "--repeat", "2", "--warmup", "0", "--format", "json")  # fmt: skip
    (r,) = json.loads(proc.stdout)["results"]
    if proc.returncode == 0:
        assert r["status"] == "ok" and max(r["samples_s"] + r["warmup_s"]) <= 1.0
        return
    assert proc.returncode == 1, proc.stderr
    said = " ".join(proc.stderr.split())
    # An estimate close to the limit is said with the digits that tell them apart: "1.03 s (limit 1.00 s)".
    refused = re.search(r"estimated at [\d.]+ s \(limit 1\.0+ s\)", said)
    assert refused or "stopped: a step ran past its limit of 1 s (--max-step)" in said, said
    assert took < 10, f"{took:.1f} s"


def test_a_step_over_its_limit_that_finished_is_no_result_in_process(tmp_path, monkeypatch):
    """The in-process engine cannot stop a step: one that finished over its limit fails all the same."""
    from gpuplay.cli import main

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    res = CliRunner().invoke(main, ["run", str(_code(tmp_path, 0.3)), "--max-step", "0.2", "--repeat", "2",
                                    "--warmup", "0", "--format", "json"])  # fmt: skip
    assert res.exit_code == 1, res.output
    (r,) = json.loads(res.stdout)["results"]
    assert r["status"] == "failed" and r["failure"] == "step-timeout"
    assert r["message"].startswith("stopped: a step ran past its limit of 0.2 s (--max-step)")
    assert "stopped: a step ran past its limit of 0.2 s" in res.stderr


def test_the_step_grace_is_one_sample_batch_and_the_cancel_grace():
    from gpuplay.core.engine import client, protocol, steplimit

    assert steplimit.STEP_GRACE_S == client.CANCEL_GRACE_S + protocol.SAMPLE_BATCH_S


def test_one_stalled_step_within_the_grace_is_noise_but_a_median_over_the_limit_is_not():
    from gpuplay.core.engine.steplimit import held_to_limit
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    spec = RunSpec.make("matmul", {"n": 8}, max_step_s=0.01)
    stalled = held_to_limit(RunResult(spec=spec, samples=[1e-5] * 99 + [0.03]))
    assert stalled.status == "ok"
    slow = held_to_limit(RunResult(spec=spec, samples=[0.02] * 9, size="8×8"))
    assert slow.status == "failed" and slow.failure == "step-timeout" and "the median 0.02 s" in slow.message
    far = held_to_limit(RunResult(spec=spec, samples=[1e-5] * 99 + [0.5]))
    assert far.status == "failed"


@pytest.mark.slow
def test_a_paired_run_whose_steps_fit_the_limit_is_not_stopped_in_its_warm_up(tmp_path):
    """A paired run's warm-up reports no step timings: three 0.3 s steps under a 0.5 s limit are
    1 s without progress, and must not read as one step past the limit."""
    code = tmp_path / "steady.py"
    code.write_text(SLEEPS_AT_FULL_SIZE.format(sleep=0.3))
    proc, _ = _gpuplay(tmp_path, "run", str(code), "-b", "torch", "--baseline", "--max-step", "0.5",
                       "--warmup", "3", "--repeat", "3", "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert all(r["status"] == "ok" for r in json.loads(proc.stdout)["results"])


@pytest.mark.slow
def test_a_paired_step_past_its_limit_is_stopped_in_the_pairs(tmp_path):
    """A step that is slow only once the pairs begin (its warm-up at the limit's edge passes):
    the pairs report each pair, and one past twice the limit and the grace is stopped."""
    code = tmp_path / "late.py"
    code.write_text(
        '"""Slow from its fourth call on."""\nimport time\n\nPARAMS = {"n": 1000}\nCALLS = [0]\n\n\n'
        "def inputs(rng, n):\n    return rng.standard_normal(n)\n\n\n"
        "def step(xp, x):\n    CALLS[0] += 1\n    if CALLS[0] > 3 and xp.__name__ != 'numpy':\n        time.sleep(5)\n"
        "    return x * 2\n"
    )
    proc, took = _gpuplay(tmp_path, "run", str(code), "-b", "torch", "--baseline", "--max-step", "0.5",
                          "--warmup", "1", "--repeat", "3")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "stopped: a step ran past its limit of 0.5 s (--max-step)" in proc.stderr
    assert "a pair of steps" in proc.stderr
