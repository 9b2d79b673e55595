"""Whether local ranks oversubscribe the cores: every rank runs its own process and threads."""

from __future__ import annotations

from gpuplay.core.hw.system import cpu_count


def threads_per_rank(nproc: int, threads: int | None, cores: int) -> int:
    """The torch threads each rank uses: as given, else the cores shared out (bench.py's rule)."""
    return threads or max(1, cores // max(1, nproc))


def oversubscription(nproc: int, threads: int | None, backend: str, cores: int | None = None) -> str:
    """A warning in words when the ranks want more cores than this process may use, else ""."""
    cores = cores or cpu_count()
    per_rank = threads_per_rank(nproc, threads, cores) if backend == "gloo" else 1
    wanted = nproc * per_rank
    if wanted <= cores:
        return ""
    how = (
        f"{nproc} ranks × {per_rank} thread{'s' if per_rank > 1 else ''}"
        if backend == "gloo"
        else f"{nproc} ranks"
    )
    return (
        f"{how} = {wanted} busy threads on {cores} cores: ranks wait for a core, and the bandwidth "
        "measures the oversubscription, not the transport"
        + ("; use fewer ranks or --threads 1" if backend == "gloo" and per_rank > 1 else "; use fewer ranks")
    )
