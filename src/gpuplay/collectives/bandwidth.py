"""Algorithm and bus bandwidth, with nccl-tests' definitions.

From nccl-tests doc/PERFORMANCE.md: algbw = S / t, with S the size of the whole
array in bytes (for all_gather and reduce_scatter, per-rank count × element size
× n). busbw = algbw × a factor that makes the figure comparable with the
hardware's peak whatever the number of ranks n:

    AllReduce      2(n-1)/n   (n-1 additions and n assignments per element: 2(n-1) transfers over n links)
    ReduceScatter   (n-1)/n   (the additions alone)
    AllGather       (n-1)/n   (the assignments alone)
    AlltoAll        (n-1)/n
    Broadcast       1         (all data leaves the root through its one link)
"""

from __future__ import annotations

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


def bus_factor(op: str, n: int) -> float:
    """The factor from algbw to busbw for `op` over `n` ranks."""
    if n < 1:
        raise ValueError(f"world size must be ≥ 1; got {n}")
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}; choose from {', '.join(OPS)}")


def algbw(size_bytes: float, seconds: float) -> float:
    """Bytes per second (S / t)."""
    return size_bytes / seconds if seconds > 0 else float("nan")


def busbw(op: str, n: int, size_bytes: float, seconds: float) -> float:
    return algbw(size_bytes, seconds) * bus_factor(op, n)
