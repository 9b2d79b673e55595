"""A step's result is bounded before it is expanded: a few arrays, no more values than the inputs'
times a stated factor. A real code file, a real `gpuplay run` through the engine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.real_engine]

HEADER = """
def inputs(rng, n=64):
    return rng.standard_normal(n)

"""


def run_code(tmp_path, body: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "big.py"
    path.write_text(HEADER + textwrap.dedent(body))
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    env.pop("GPUPLAY_IN_PROCESS", None)
    return subprocess.run([sys.executable, "-m", "gpuplay", "run", str(path), "--budget", "0.05"],
                          env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_list_of_many_arrays_is_refused_with_the_reason(tmp_path):
    # 200,000 references to one array: cheap to return, 100 MB once expanded for the check.
    res = run_code(tmp_path, "def step(xp, x):\n    return [x] * 200_000\n")
    assert res.returncode == 1, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "step() returned a list of 200,000 items; at most 8 arrays" in err, err
    assert "Traceback" not in err


def test_an_array_far_larger_than_the_inputs_is_refused_before_it_is_expanded(tmp_path):
    # A broadcast view: 2^25 values that take no memory until the check would widen them (256 MB).
    res = run_code(tmp_path, "def step(xp, x):\n    return xp.broadcast_to(x[:1], (2**25,))\n")
    assert res.returncode == 1, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert "step() returned 33,554,432 values" in err and "64 × the inputs' 64 values" in err, err


def test_a_result_within_the_bound_still_runs(tmp_path):
    res = run_code(
        tmp_path,
        "def step(xp, x):\n    return (x * 2, xp.sum(x), xp.reshape(x, (8, 8)) @ xp.reshape(x, (8, 8)))\n",
    )
    assert res.returncode == 0, res.stdout + res.stderr
