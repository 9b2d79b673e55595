"""`gpuplay compare --devices` and `--from` through the real command, on real measurements."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))


def _gpuplay(*args, cwd=None):
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)  # fmt: skip


def test_devices_all_without_cuda_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA GPUs")
    r = _gpuplay("compare", "--devices", "all")
    assert r.returncode == 1
    assert "--devices all found no CUDA device" in r.stderr and "use --devices cpu" in r.stderr
    assert "Traceback" not in r.stderr


def test_devices_cpu_runs_on_the_cpu(tmp_path):
    out = tmp_path / "d.json"
    r = _gpuplay("compare", "--devices", "cpu", "--scenario", "matmul", "--backends", "numpy,torch",
                 "--budget", "0.1", "--format", "json", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["devices"] == ["cpu"]
    assert [row["configuration"] for row in doc["rows"]] == ["numpy float32", "torch float32"]
    assert all(row["medians_s"]["cpu"] > 0 and row["outliers"] == {} for row in doc["rows"])


def test_from_merges_two_real_run_files(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r1 = _gpuplay("run", "matmul", "-s", "n=128", "--budget", "0.1", "--format", "json", "--out", str(a))
    r2 = _gpuplay(
        "run", "matmul", "-s", "n=128", "-b", "torch", "--budget", "0.1", "--format", "json", "--out", str(b)
    )
    assert r1.returncode == 0 and r2.returncode == 0, r1.stderr + r2.stderr
    r = _gpuplay("compare", "--from", str(a), str(b))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "| scenario | size | configuration | a.json | b.json |"
    assert any(line.startswith("|  |  | *versions* | gpuplay") for line in lines)
    numpy_row = next(line for line in lines if "numpy cpu float32" in line)
    torch_row = next(line for line in lines if "torch cpu float32" in line)
    # each configuration's figure is in its own file's column, the other column empty
    assert numpy_row.split("|")[4].strip().endswith("%") and numpy_row.split("|")[5].strip() == "—"
    assert torch_row.split("|")[5].strip().endswith("%")
    bad = _gpuplay("compare", "--from", str(a), str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "missing.json: no such file" in bad.stderr  # a usage error
