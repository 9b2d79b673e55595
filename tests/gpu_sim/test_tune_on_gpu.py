"""`gpuplay tune` on the simulated H100: the GPU rungs (AMP fp16, TF32, compile reduce-overhead,
CUDA graphs) are climbed on cuda:0, not refused as on a CPU, each paired with the best so far.

The simulation cannot run inductor (its CUDA code needs torch._C's CUDA bindings): the compile
rungs fail there, and the ladder drops them naming the error, as it would any failing rung."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]


@pytest.mark.long(36)
def test_the_gpu_rungs_are_climbed_on_the_simulated_h100(tmp_path):
    env = sim_env("h100", tmp_path)
    cmd = [sys.executable, "-m", "gpuplay", "tune", "matmul", "-d", "cuda:0", "-s", "n=64",
           "--budget-total", "40", "--format", "json"]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout)
    rungs = {r["name"]: r for r in data["rungs"]}
    assert list(rungs) == ["baseline", "device", "amp-bf16", "amp-fp16", "tf32", "compile", "compile-ro",
                           "compile-ma", "graphs"]  # fmt: skip
    assert rungs["baseline"]["configuration"] == "numpy cpu float32" and rungs["baseline"]["kept"]
    assert SIM_NAME_MARK in rungs["device"]["conditions"]["device_name"]
    for name in ("device", "amp-bf16", "amp-fp16", "tf32", "graphs"):
        r = rungs[name]
        assert r["status"] == "measured", r  # climbed, timed and judged: none refused on a GPU
        assert "cuda:0" in r["configuration"] and r["against"] and r["interval"], r
        assert r["kept"] == (r["interval"][0] > 1)
    assert rungs["tf32"]["conditions"]["fp32_precision"].startswith("TF32")
    for name in ("compile", "compile-ro", "compile-ma"):  # the simulation has no inductor: dropped, said
        assert rungs[name]["status"] in ("dropped", "measured") and rungs[name]["reason"], rungs[name]
    assert data["verdict"].startswith("kept ")
