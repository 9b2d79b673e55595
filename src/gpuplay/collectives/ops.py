"""Each collective with rank-dependent inputs whose exact result is known in advance.

Inputs are small integers in float32, so every sum is exact and a result either
matches to the bit or is wrong. S is the whole array (nccl-tests' convention):
all_gather gathers n chunks of S/n into S; reduce_scatter reduces S and leaves
S/n on each rank; all_to_all sends S/n to each peer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ELEMENT_BYTES = 4  # float32


@dataclass
class Case:
    """One op at one size on one rank: `run` is what is timed, `reset` restores inputs, `error` checks."""

    op: str
    count: int  # elements of the whole array S
    run: Callable[[], Any]
    reset: Callable[[], Any]
    error: Callable[[], float]  # max |result − expected| on this rank

    @property
    def size_bytes(self) -> int:
        return self.count * ELEMENT_BYTES


def element_count(size_bytes: int, n: int) -> int:
    """Elements of the whole array, rounded down to a multiple of n (at least n), as nccl-tests does."""
    count = max(size_bytes // ELEMENT_BYTES, 1)
    return max(count - count % n, n)


def make_case(op: str, size_bytes: int, rank: int, n: int, device: Any) -> Case:
    import torch
    import torch.distributed as dist

    count = element_count(size_bytes, n)
    chunk = count // n
    f32 = torch.float32

    def pattern(length: int) -> Any:
        return torch.arange(length, dtype=torch.int64, device=device).remainder_(7).to(f32)

    def max_err(got: Any, want: Any) -> float:
        return float((got - want).abs().max().item()) if got.numel() else 0.0

    if op == "all_reduce":
        src = pattern(count) + (rank + 1)
        buf = src.clone()
        # Σ_r (r + 1 + p) = n(n+1)/2 + n·p
        want = pattern(count) * n + n * (n + 1) / 2
        return Case(
            op, count, lambda: dist.all_reduce(buf), lambda: buf.copy_(src), lambda: max_err(buf, want)
        )
    if op == "broadcast":
        src = pattern(count) + 1 if rank == 0 else torch.full((count,), -1.0, dtype=f32, device=device)
        buf = src.clone()
        want = pattern(count) + 1
        return Case(
            op, count, lambda: dist.broadcast(buf, src=0), lambda: buf.copy_(src), lambda: max_err(buf, want)
        )
    if op == "all_gather":
        inp = pattern(chunk) + (rank + 1)
        out = torch.full((count,), -1.0, dtype=f32, device=device)
        want = torch.cat([pattern(chunk) + (r + 1) for r in range(n)])
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return Case(op, count, lambda: gather(out, inp), lambda: out.fill_(-1.0), lambda: max_err(out, want))
    if op == "reduce_scatter":
        inp = pattern(count) + (rank + 1)
        out = torch.full((chunk,), -1.0, dtype=f32, device=device)
        # rank r keeps chunk r of the sum: n·p[r·chunk + i] + n(n+1)/2
        want = pattern(count)[rank * chunk : (rank + 1) * chunk] * n + n * (n + 1) / 2
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return Case(op, count, lambda: scatter(out, inp), lambda: out.fill_(-1.0), lambda: max_err(out, want))
    if op == "all_to_all":
        # chunk j of rank r goes to rank j and holds 1 + r + n·j: the receiver can tell sender and slot
        inp = torch.cat(
            [torch.full((chunk,), 1.0 + rank + n * j, dtype=f32, device=device) for j in range(n)]
        )
        out = torch.full((count,), -1.0, dtype=f32, device=device)
        want = torch.cat(
            [torch.full((chunk,), 1.0 + s + n * rank, dtype=f32, device=device) for s in range(n)]
        )
        return Case(
            op,
            count,
            lambda: dist.all_to_all_single(out, inp),
            lambda: out.fill_(-1.0),
            lambda: max_err(out, want),
        )
    from gpuplay.collectives.bandwidth import OPS

    raise ValueError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")
