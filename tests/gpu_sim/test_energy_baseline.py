"""Energy per step on the simulated H100: the idle baseline is the board's idle power, not the
power still falling after the hot phase (the simulation's power decays towards idle once its
kernels stop, as a real board's clocks and temperature do)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import sim_env
from tests.gpu_sim.device import IDLE_W

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]


def test_the_idle_baseline_waits_for_power_to_settle_after_the_hot_phase(tmp_path):
    env = sim_env("h100", tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "gpuplay", "run", "matmul", "-b", "torch", "-d", "cuda:0", "--no-baseline",
         "--budget", "0.3", "-s", "n=128", "--energy", "--no-check", "--format", "json"],
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    energy = json.loads(out.stdout)["results"][0]["telemetry"]["energy"]
    assert energy["status"] == "ok", energy
    # The board idles at IDLE_W; a baseline taken while it still cools reads more, and the
    # joules the steps added read low by the difference times the window.
    assert energy["idle_w"] == pytest.approx(IDLE_W, rel=0.05)
    assert energy["idle_settle_s"] is not None and energy["idle_settle_s"] > 0
