"""A paired run's GPU figures are the GPU side's own: its window holds none of the NumPy side's
time (the simulated board idle then), and the result says which window it covers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import covered, gpm_windows, read_ledger, sim_env, timed_intervals

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]


def test_a_paired_runs_gpu_activity_is_over_the_gpu_sides_own_steps(tmp_path):
    env = sim_env("h100", tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "gpuplay", "run", "matmul", "-b", "torch", "-d", "cuda:0", "--baseline",
         "--budget", "0.3", "-s", "n=128", "--no-energy", "--no-check", "--format", "json"],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)["results"]
    cand = next(r for r in results if r["spec"]["backend"] == "torch")
    gpu = cand["telemetry"]["gpu"]
    activity = gpu["activity"]
    ledger = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"])
    # The GPM window the figures were read over: the pair of samples as long as the reported window.
    s1, s2 = min(
        gpm_windows(ledger), key=lambda w: abs(w[1]["t_sample"] - w[0]["t_sample"] - activity["window_s"])
    )
    share = covered(timed_intervals(ledger), s1["t_sample"], s2["t_sample"])
    # The GPU side's timed steps fill its window (less the loop's own bookkeeping); in the pairs'
    # window half the time or more is NumPy's, with the board idle.
    assert share >= 0.75, f"GPM window covers {share:.0%} GPU steps"
    sm = (s2["counts"]["sm"] - s1["counts"]["sm"]) / (s2["t_sample"] - s1["t_sample"])
    assert activity["sm_active"] == pytest.approx(sm, rel=0.02, abs=0.5)
    assert "after the pairs" in cand["telemetry"]["gpu_window"]
    assert "after the pairs" in cand["conditions"]["gpu_activity"]
