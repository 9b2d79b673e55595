"""The host allocator's modes on a GPU run, through `gpuplay run` into the engine on the simulated
H100: a device step's memory is the caching allocator's, so no cold probe runs and no fresh
process's plain loop is asked, even where every host array is mapped and unmapped (a fixed mmap
threshold in the environment makes a host step allocation-bound)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]


def test_a_gpu_run_asks_no_fresh_plain_loop_and_keeps_its_own_samples(tmp_path):
    env = sim_env("h100", tmp_path) | {"MALLOC_MMAP_THRESHOLD_": "65536", "NUMPY_MADVISE_HUGEPAGE": "0"}
    cmd = [sys.executable, "-m", "gpuplay", "run", "elementwise", "-b", "torch", "-d", "cuda:0", "-s",
           "n=1000000", "--budget", "0.2", "--no-baseline", "--format", "json"]  # fmt: skip
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok", r.get("message")
    c = r["conditions"]
    assert SIM_NAME_MARK in c["device_name"]
    assert c["alloc"] == "warm" and r["other_mode"] is None
    for key in (
        "alloc_cold_probe",
        "alloc_plain_loop",
        "alloc_fresh_loops",
        "alloc_fresh_spread",
        "alloc_timed_in",
    ):
        assert key not in c, key
