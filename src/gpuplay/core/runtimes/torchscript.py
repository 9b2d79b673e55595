"""TorchScript: torch.jit.trace, then torch.jit.freeze (weights folded in as constants).

TorchScript is deprecated in favour of torch.compile (PyTorch's own words); it is measured here
because the speed-levers article names it and models still ship that way.
"""

from __future__ import annotations

import time
import warnings
from typing import Any


def available(device: str) -> str | None:
    return None


def dtype_refusal(dtype: str) -> str | None:
    return None


def notes(device: str, conditions: dict[str, Any]) -> list[str]:
    return [
        "runtime: TorchScript is deprecated in favour of torch.compile (PyTorch's words); traced and frozen here"
    ]


def build(
    model: Any, example: Any, dtype: str, device: str, tf32: bool = False
) -> tuple[Any, float, dict[str, Any]]:
    # torch's own kernels: they read torch's TF32 flags, which the run set already
    import torch

    t0 = time.perf_counter()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the deprecation, said once in the notes instead
        traced = torch.jit.trace(model.eval(), (example,), check_trace=False)
        frozen = torch.jit.freeze(traced)
    return frozen, time.perf_counter() - t0, {"runtime": "torchscript", "torchscript": "trace + freeze"}
