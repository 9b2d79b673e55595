"""Attention: softmax(QKᵀ/√d)·V. Naive on NumPy and CuPy; PyTorch's fused backends as a lever.

`sdpa` picks the kernel behind torch's `scaled_dot_product_attention` through
`torch.nn.attention.sdpa_kernel`: math (the unfused reference), flash,
memory-efficient, cuDNN, or auto (torch chooses). A backend that cannot run the
input on this device is refused before the run, with torch's own reason.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Param, Workload

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

# The names of torch.nn.attention.SDPBackend members, by the lever's value.
SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


def attention(xp: Any, q: Any, k: Any, v: Any, causal: bool) -> Any:
    # The textbook form: the whole s×s score matrix is materialised in memory.
    scores = q @ xp.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = scores.shape[-1]
        scores = xp.where(xp.triu(xp.ones((n, n), dtype=bool), k=1), -xp.inf, scores)
    scores = scores - scores.max(axis=-1, keepdims=True)  # softmax without overflow
    weights = xp.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v


def attention_torch(torch: Any, q: Any, k: Any, v: Any, causal: bool, backend: Any) -> Any:
    # backend None: torch picks (flash, memory-efficient, cuDNN or math) per input.
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if backend is None:
        return sdpa(q, k, v, is_causal=causal)
    with torch.nn.attention.sdpa_kernel(backend):
        return sdpa(q, k, v, is_causal=causal)


def _sdpa_backend(name: str) -> Any:
    if name == "auto":
        return None
    from torch.nn.attention import SDPBackend

    return getattr(SDPBackend, SDPA_BACKENDS[name])


@functools.lru_cache(maxsize=64)
def sdpa_refusal(sdpa: str, device: str, dtype: str, causal: bool, head_dim: int) -> str | None:
    """Why torch's `sdpa` backend cannot run this input here, from a tiny real call; None if it can."""
    import torch

    from gpuplay.core.backends.torch_backend import torch_dtype

    q = torch.zeros((1, 1, 16, head_dim), device=device, dtype=torch_dtype(dtype))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # torch explains each rejected backend in a UserWarning
        try:
            attention_torch(torch, q, q, q, causal, _sdpa_backend(sdpa))
            return None
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0]
    why = "; ".join(dict.fromkeys(str(w.message).strip().splitlines()[0] for w in caught))
    return (
        f"the {sdpa} attention backend cannot run here (PyTorch {torch.__version__}, {device}, {dtype}, "
        f"head dim {head_dim}{', causal' if causal else ''}): {first}"
        + (f" [{why}]" if why else "")
        + "; choose sdpa=math, flash or auto"
    )


class Attention(Workload):
    name = "attention"
    title = "Attention softmax(QKᵀ/√d)·V"
    category = "attention"
    params = (
        Param("batch", int, 4, "batch size", minimum=1, maximum=4096, size=True),
        Param("heads", int, 8, "attention heads", minimum=1, maximum=256),
        Param("seq", int, 512, "sequence length", minimum=2, maximum=1 << 17),
        Param("dim", int, 64, "head dimension", minimum=1, maximum=1024),
        Param("causal", str, "off", "mask future positions", choices=("off", "on")),
        Param(
            "sdpa",
            str,
            "auto",
            "torch attention backend (NumPy/CuPy always compute the naive form)",
            choices=("auto", "math", "flash", "efficient", "cudnn"),
        ),
    )
    amp_eligible = True  # scaled_dot_product_attention and matmul autocast to half precision
    tol_scale = 8.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        label = f"{p['batch']}×{p['heads']}×{p['seq']}×{p['dim']}"
        return label + (" causal" if p["causal"] == "on" else "")

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        shape = (p["batch"], p["heads"], p["seq"], p["dim"])
        return tuple(rng.standard_normal(shape) for _ in range(3))

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return attention_torch if backend == "torch" else attention

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        causal = p["causal"] == "on"
        if backend == "torch":
            return functools.partial(attention_torch, xp, causal=causal, backend=_sdpa_backend(p["sdpa"]))
        return functools.partial(attention, xp, causal=causal)

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        q, k, v = inputs
        return np.asarray(attention(np, q, k, v, p["causal"] == "on"))

    def flops(self, p: Mapping[str, Any]) -> float:
        # QKᵀ and PV, counted in full even when causal (the naive form computes every score).
        return 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["dim"]

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 4.0 * p["batch"] * p["heads"] * p["seq"] * p["dim"] * itemsize  # Q, K, V read; O written

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        bh = p["batch"] * p["heads"]
        return 4.0 * bh * p["seq"] * p["dim"] + 2.0 * bh * p["seq"] ** 2  # naive: scores and weights

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return self.tol_scale * EPS[compute_dtype] * max(1.0, math.log2(p["seq"] * p["dim"]))

    def unsupported_in(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        # Probed in the precision the kernel computes in: under AMP the autocast dtype, where
        # flash attention runs, not the float32 of the inputs, where it refuses.
        # Decided where torch is already loaded (the planner probes it first); never imported here,
        # so a UI process that checks options does not load torch for this.
        if backend != "torch" or p["sdpa"] == "auto" or "torch" not in sys.modules:
            return None
        return sdpa_refusal(p["sdpa"], device, dtype, p["causal"] == "on", p["dim"])

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        if backend == "torch":
            chosen = "torch chooses the kernel" if p["sdpa"] == "auto" else f"{p['sdpa']} kernel forced"
            return [f"attention: torch scaled_dot_product_attention, {chosen}"]
        return [
            f"attention: {backend} computes the naive softmax(QKᵀ/√d)·V, materialising the "
            f"{p['seq']}×{p['seq']} scores (sdpa={p['sdpa']} applies to torch only)"
        ]


WORKLOADS: list[Callable[[], Workload]] = [Attention]
