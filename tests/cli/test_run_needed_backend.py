"""`gpuplay run` on the backend the parameters need (no -b), through the real engine as users run it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.real_engine
def test_run_on_the_backend_the_parameters_need_is_probed_not_refused(tmp_path):
    # `gpuplay run dataloader` (no -b) runs on torch: the engine started early for numpy must also
    # probe torch, or the planner refused it as "still being probed".
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}
    env |= {"GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gpuplay", "run", "dataloader", "-s", "batch=2", "-s", "size=32",
           "--format", "json", "--repeat", "1", "--warmup", "0", "--no-check"]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert "these parameters run on torch" in proc.stderr
    assert "still being probed" not in proc.stderr + proc.stdout
    assert proc.returncode == 0, proc.stderr
