"""TF32 on AMD's MI300, through `gpuplay run`: ATen's TF32 under ROCm goes through hipBLASLt, which
allows it only with HIPBLASLT_ALLOW_TF32=1 in the environment before torch loads. The engine a
front end starts has it (core/engine/process.py amd_env), the result's conditions say so, and the
simulated torch records what the engine process really had when it loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, read_ledger, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]

HIPBLASLT = "HIPBLASLT_ALLOW_TF32"


def test_a_tf32_run_on_a_simulated_mi300_has_hipblaslt_allow_tf32_in_the_engine(tmp_path):
    env = sim_env("mi300", tmp_path)
    env.pop(HIPBLASLT, None)  # the user set nothing: the engine must set it itself
    out = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-b", "torch", "-d", "cuda:0", "--tf32",
                          "-p", "quick", "--budget", "0.2", "--no-baseline", "--format", "json"],
                         env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok" and r["check_ok"], r.get("message")
    c = r["conditions"]
    # an AMD board, named as simulated, under ROCm: never called CUDA
    assert SIM_NAME_MARK in c["device_name"] and "gfx942" in c["device_name"] and "ROCm" in c["device_name"]
    assert c["timer"].startswith("HIP events")
    assert c["fp32_precision"].startswith("TF32")
    assert c["hipblaslt_allow_tf32"].startswith(f"{HIPBLASLT}=1 in the engine's environment"), c
    # no NVML on an AMD machine: its telemetry would be amdsmi's, which is not here
    assert r["telemetry"]["gpu"] is None and "amdsmi" in r["telemetry"]["gpu_note"]
    (engine,) = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"], "device")  # torch loads in the engine only
    assert engine["kind"] == "mi300" and engine["hipblaslt_allow_tf32"] == "1", engine
