"""NCCL and every-device compare on real NVIDIA GPUs (skipped where there is none)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))


def _gpuplay(*args):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "gpuplay", *args], capture_output=True, text=True, timeout=600, env=env
    )


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def test_nccl_world_of_one_is_a_real_run(tmp_path):
    out = tmp_path / "n.json"
    r = _gpuplay("collectives", "--nproc", "1", "--backend", "nccl", "--sizes", "1M,64M", "--iters", "5",
                 "--format", "json", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["backend"] == "nccl" and doc["environment"].get("nccl")
    assert all(x["status"] == "ok" and x["check_ok"] for x in doc["results"])


def test_nccl_every_local_gpu(tmp_path):
    n = _gpus()
    if n < 2:
        pytest.skip("needs two GPUs")
    out = tmp_path / "n.json"
    r = _gpuplay("collectives", "--nproc", str(n), "--backend", "nccl", "--sizes", "1M,256M", "--iters", "5",
                 "--format", "json", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert all(x["check_ok"] and x["busbw_gbs"] > 0 for x in doc["results"])


def test_too_many_nccl_ranks_refused():
    r = _gpuplay("collectives", "--nproc", str(_gpus() + 1), "--backend", "nccl", "--sizes", "1K")
    assert r.returncode == 1 and "NCCL needs one GPU per local rank" in r.stderr


def test_devices_all(tmp_path):
    out = tmp_path / "d.json"
    r = _gpuplay("compare", "--devices", "all", "--scenario", "matmul", "--backends", "torch", "--budget", "0.3",
                 "--format", "json", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["devices"] == [f"cuda:{i}" for i in range(_gpus())]
    assert all(v is not None for row in doc["rows"] for v in row["medians_s"].values())
