"""A --tf32 run on the simulated H100, through `gpuplay run`: inside it torch's legacy precision
getter answers, as inductor's GEMM autotuning reads it under --compile max-autotune
(torch.get_float32_matmul_precision, _inductor/select_algorithm.py), and agrees with the new API.

The simulation cannot run inductor itself (its CUDA code needs torch._C's CUDA bindings), so the
step reads what inductor reads, in the engine process, with the flags the run set.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]

STEP = '''
"""Reads torch's float32 matmul precision through both APIs, then multiplies."""
import torch

PARAMS = {"n": 64}


def inputs(rng, n):
    return rng.standard_normal((n, n))


def step(xp, a):
    legacy = torch.get_float32_matmul_precision()  # raised inside a --tf32 run when the APIs were mixed
    new = torch.backends.cuda.matmul.fp32_precision
    if (legacy, new) not in (("high", "tf32"), ("highest", "ieee")):
        raise ValueError(f"the precision APIs disagree: {legacy} / {new}")
    return a @ a
'''


@pytest.mark.parametrize("tf32", [True, False])
def test_torchs_legacy_precision_getter_answers_inside_a_tf32_run(tmp_path, tf32):
    code = tmp_path / "precision_step.py"
    code.write_text(STEP)
    env = sim_env("h100", tmp_path)
    out = subprocess.run([sys.executable, "-m", "gpuplay", "run", str(code), "-b", "torch", "-d", "cuda:0",
                          "--repeat", "3", "--warmup", "1", "--no-energy", "--no-check", "--format", "json",
                          *(["--tf32"] if tf32 else [])],
                         env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok", r.get("message")
    assert SIM_NAME_MARK in r["conditions"]["device_name"]
    assert r["conditions"]["fp32_precision"].startswith("TF32" if tf32 else "IEEE")
