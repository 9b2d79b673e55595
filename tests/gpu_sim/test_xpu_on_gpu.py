"""An Intel GPU (torch.xpu) through gpuplay's public paths, on the simulated XPU: a queued device,
whose kernels run after the host issues them, so only the device's events or a synchronisation
see their time (tests/gpu_sim/device.py, `asynchronous`; each matmul kernel takes 20 ms there)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, read_ledger, sim_env
from tests.gpu_sim.device import XPU

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]

COMPARE = """
import json, sys
import gpuplay
res = gpuplay.compare("matmul", backends=["torch"], devices=["xpu:0"], preset="quick", budget_s=0.2,
                      progress=False)
print(json.dumps({"results": [{"device": r.device, "backend": r.backend, "status": r.status,
                               "message": r.message, "check_ok": r.check_ok, "samples": list(r.samples),
                               "conditions": r.conditions} for r in res],
                  "refused": [list(x) for x in res.refused]}, default=str))
"""


def test_gpuplay_compare_measures_on_xpu0(tmp_path):
    env = sim_env("xpu", tmp_path)
    out = subprocess.run([sys.executable, "-c", COMPARE], env=env, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    (xpu,) = [r for r in got["results"] if r["device"] == "xpu:0"]
    assert xpu["status"] == "ok" and xpu["check_ok"], xpu["message"]
    c = xpu["conditions"]
    assert SIM_NAME_MARK in c["device_name"] and c["timer"] == "XPU events (torch.xpu)"
    # timed by the device's events: each step is the matmul kernel's device time, not its launch
    assert min(xpu["samples"]) >= 0.95 * XPU.matmul_device_s, xpu["samples"]
    assert any(
        row["kind"].startswith("matmul") for row in read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"], "kernel")
    )


def test_the_dataloader_split_on_xpu_times_the_models_device_work(tmp_path):
    env = sim_env("xpu", tmp_path)
    out = subprocess.run([sys.executable, "-m", "gpuplay", "run", "dataloader", "-b", "torch", "-d", "xpu:0",
                          "-p", "quick", "--budget", "0.3", "--no-baseline", "--format", "json"],
                         env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok" and r["check_ok"], r.get("message")
    assert SIM_NAME_MARK in r["conditions"]["device_name"]
    ledger = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"])
    kernels = [row for row in ledger if row["event"] == "kernel"]
    # the model's two matmuls (fc1, fc2) were issued and the host went on before the device was done
    assert kernels and all(k["t_host"] < k["t1"] for k in kernels)
    model_s = r["split"]["per_step"]["model_s"]
    # The model's device time, 2 × 20 ms a step, is what the split's model phase says: seen by
    # XPU events around it. A host clock around the launches reads the host's time (~1 ms).
    assert len(model_s) >= 3
    assert statistics.median(model_s) >= 0.95 * 2 * XPU.matmul_device_s, model_s
    assert all(m >= 0.95 * 2 * XPU.matmul_device_s for m in model_s), model_s
    # and the step's own time covers it
    assert r["split"]["model_s"] <= statistics.median(r["samples_s"]) * 1.05
