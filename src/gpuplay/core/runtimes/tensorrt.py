"""TensorRT through Torch-TensorRT: the model compiled into a TensorRT engine (NVIDIA GPUs only).

Not verified on real hardware in gpuplay's tests: on a machine without an NVIDIA GPU or without
the torch_tensorrt package it is refused with the reason, never attempted.

TensorRT builds float32 layers with TF32 unless told (torch_tensorrt.compile's disable_tf32 is
False by default): the run's tf32 lever is passed as disable_tf32, so tf32 off is IEEE float32.
"""

from __future__ import annotations

import time
from typing import Any

from gpuplay.core.runtimes import installed

PRECISIONS = ("float32", "float16")


def available(device: str) -> str | None:
    if not device.startswith("cuda"):
        return f"TensorRT runs on NVIDIA GPUs only (cuda:N); this run is on {device}"
    if not installed("torch_tensorrt"):
        return "Torch-TensorRT is not installed: pip install torch-tensorrt (a CUDA build of torch to match; from a checkout: pip install -e '.[tensorrt]')"
    return None


def dtype_refusal(dtype: str) -> str | None:
    if dtype not in PRECISIONS:
        return f"TensorRT engines here are float32 or float16; dtype is {dtype}"
    return None


def notes(device: str, conditions: dict[str, Any]) -> list[str]:
    return [
        "runtime: TensorRT, compiled by torch_tensorrt.compile (ir=dynamo) into an engine for these shapes"
    ]


def build(
    model: Any, example: Any, dtype: str, device: str, tf32: bool = False
) -> tuple[Any, float, dict[str, Any]]:
    import torch
    import torch_tensorrt

    precision = {"float32": torch.float32, "float16": torch.float16}[dtype]
    t0 = time.perf_counter()
    engine = torch_tensorrt.compile(
        model.eval(), ir="dynamo", inputs=[example], enabled_precisions={precision}, disable_tf32=not tf32
    )
    return (
        engine,
        time.perf_counter() - t0,
        {
            "runtime": "tensorrt",
            "torch_tensorrt": getattr(torch_tensorrt, "__version__", "?"),
            "trt_precisions": dtype,
            "trt_tf32": "on" if tf32 else "off (disable_tf32=True)",
        },
    )
