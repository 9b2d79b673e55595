"""Which torch.distributed backend can run here, and why not when it cannot."""

from __future__ import annotations

from typing import Any

BACKENDS = ("gloo", "nccl")


def nccl_unavailable(nproc: int | None = None, torch: Any = None) -> str:
    """'' when NCCL can run `nproc` local ranks (one GPU each), else the reason in words."""
    if torch is None:
        import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        from gpuplay.core.backends.torch_backend import cuda_unavailable_reason

        return f"NCCL needs CUDA GPUs; this machine has none ({cuda_unavailable_reason(torch)})"
    if not dist.is_nccl_available():
        return f"NCCL needs CUDA GPUs and a PyTorch built with NCCL; PyTorch {torch.__version__} has no NCCL"
    have = torch.cuda.device_count()
    if nproc is not None and nproc > have:
        return f"NCCL needs one GPU per local rank: {nproc} ranks asked, {have} GPU(s) visible here"
    return ""


def default_backend() -> str:
    """nccl where CUDA GPUs are, gloo elsewhere."""
    try:
        return "gloo" if nccl_unavailable() else "nccl"
    except ImportError:
        return "gloo"
