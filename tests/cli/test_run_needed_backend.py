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


def test_baseline_of_a_workload_with_no_numpy_form_is_said_not_a_failure():
    # The dataloader is torch's DataLoader: no NumPy form, so no NumPy baseline. The run's figures
    # stand (exit 0), one stderr line says why there is no speedup, as gpuplay.run notes it.
    import json

    from click.testing import CliRunner

    from gpuplay.cli import main

    res = CliRunner().invoke(main, ["run", "dataloader", "--baseline", "-s", "batch=2", "-s", "size=32",
                                    "--format", "json", "--repeat", "1", "--warmup", "0"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "no NumPy baseline for dataloader" in res.stderr and "refused" not in res.stderr
    rows = json.loads(res.stdout)["results"]
    assert [r["spec"]["backend"] for r in rows] == ["torch"] and rows[0]["status"] == "ok"
