"""Inference runtimes on the simulated H100, through `gpuplay run`: what Torch-TensorRT is told
(the tf32 lever as disable_tf32), and CUDA graphs refused for ONNX Runtime, whose kernels torch's
capture cannot record.

The runtimes' packages are doubles on the engine's PYTHONPATH (after the simulation's site):
`torch_tensorrt.compile` follows Torch-TensorRT's documented signature (ir, inputs,
enabled_precisions, disable_tf32 default False), writes what it was given to the simulation's
ledger and returns the module, which then runs on the simulated device; onnxruntime, onnx and
onnxscript are importable names with an onnxruntime-gpu distribution beside them, enough for the
planner (which never imports them). ONNX Runtime's own build needs torch's ONNX exporter, which
does not run on the simulated tensors: its options are pinned by tests/unit/test_runtime_gpu_options.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu_sim import SIM_NAME_MARK, read_ledger, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]

TORCH_TENSORRT = '''
"""A double of torch_tensorrt for gpuplay's simulated-GPU tests: records, then runs the module."""
from tests.gpu_sim.device import ledger

__version__ = "0.0+double"
DISABLE_TF32_DEFAULT = False  # torch_tensorrt.dynamo.compile's default: float32 layers in TF32


def compile(module, ir="default", inputs=None, **settings):
    ledger("torch_tensorrt.compile", ir=ir, disable_tf32=settings.get("disable_tf32", DISABLE_TF32_DEFAULT),
           enabled_precisions=sorted(str(p) for p in settings.get("enabled_precisions", ())))
    return module
'''
SMALL = [a for kv in ("model=block", "batch=2", "seq=8", "width=32", "heads=4") for a in ("-s", kv)]


def _doubles(tmp_path: Path) -> Path:
    root = tmp_path / "doubles"
    (root / "torch_tensorrt").mkdir(parents=True)
    (root / "torch_tensorrt" / "__init__.py").write_text(TORCH_TENSORRT)
    for name in ("onnxruntime", "onnx", "onnxscript"):
        (root / name).mkdir()
        (root / name / "__init__.py").write_text(f'"""A double: {name} importable by name, never run."""\n')
    dist = root / "onnxruntime_gpu-1.22.0.dist-info"
    dist.mkdir()
    dist.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: 1.22.0\n")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    env = sim_env("h100", tmp_path)
    first, _, rest = env["PYTHONPATH"].partition(os.pathsep)  # the simulation's site stays first
    env["PYTHONPATH"] = os.pathsep.join(p for p in (first, str(_doubles(tmp_path)), rest) if p)
    return env


def gpuplay(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=240)  # fmt: skip


@pytest.mark.parametrize("tf32", [False, True])
def test_the_tf32_lever_reaches_torch_tensorrt_on_the_gpu(tmp_path, tf32):
    env = _env(tmp_path)
    out = gpuplay(["run", "inference", "-b", "torch", "-d", "cuda:0", *SMALL, "-s", "runtime=tensorrt",
                   "--repeat", "3", "--warmup", "1", "--no-energy", "--format", "json",
                   *(["--tf32"] if tf32 else [])], env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok", r.get("message")
    assert SIM_NAME_MARK in r["conditions"]["device_name"]
    (built,) = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"], "torch_tensorrt.compile")
    assert built["disable_tf32"] is (not tf32)  # tf32 off: TensorRT told, not left at its TF32 default
    assert built["enabled_precisions"] == ["torch.float32"]
    assert r["conditions"]["trt_tf32"].startswith("on" if tf32 else "off")


def test_cuda_graphs_with_onnx_runtime_are_refused_with_the_reason_and_what_to_do(tmp_path):
    env = _env(tmp_path)
    out = gpuplay(["run", "inference", "-b", "torch", "-d", "cuda:0", *SMALL, "-s", "runtime=onnxruntime",
                   "--graphs", "--repeat", "3", "--no-energy"], env)  # fmt: skip
    said = " ".join((out.stdout + out.stderr).split())  # a terminal width may fold the line
    assert out.returncode != 0 and "Traceback" not in said
    assert "runtime=onnxruntime cannot be captured in a CUDA graph" in said
    assert "turn --graphs off" in said
