"""Eager PyTorch: the torch.nn module called as it is, op by op (the default, no build)."""

from __future__ import annotations

from typing import Any


def available(device: str) -> str | None:
    return None


def dtype_refusal(dtype: str) -> str | None:
    return None


def notes(device: str, conditions: dict[str, Any]) -> list[str]:
    return []


def build(
    model: Any, example: Any, dtype: str, device: str, tf32: bool = False
) -> tuple[Any, float, dict[str, Any]]:
    # torch's own kernels: they read torch's TF32 flags, which the run set already
    return model, 0.0, {"runtime": "eager"}
