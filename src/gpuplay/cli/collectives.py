"""`gpuplay collectives`: local ranks of a torch.distributed sweep, launched and watched here."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpuplay.collectives.cli import out_format, parse_ops, sizes_or_fail, sweep_options, write_output


@click.command()
@click.option(
    "--nproc", type=click.IntRange(min=1), default=2, show_default=True, help="Local ranks to launch."
)
@sweep_options
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Rendezvous port on 127.0.0.1 (default: a free one).")  # fmt: skip
def collectives(
    nproc: int | None,
    ops: tuple[str, ...],
    backend: str | None,
    sizes: str | None,
    iters: int,
    warmup: int,
    timeout_s: float,
    threads: int | None,
    fmt: str,
    out: str | None,
    port: int | None,
) -> None:
    """all_reduce, all_gather, reduce_scatter, broadcast and all_to_all over torch.distributed.

    Launches NPROC local ranks (gloo on the CPU, NCCL with one GPU per rank), sweeps message
    sizes, checks every result and reports median time, algbw and busbw (nccl-tests'
    definitions). Across nodes, run `torchrun ... -m gpuplay.collectives` instead (docs/collectives.md).
    """
    from gpuplay.collectives.backend import default_backend, nccl_unavailable
    from gpuplay.collectives.launch import LaunchError, launch

    fmt = out_format(fmt, out)
    backend = backend or default_backend()
    op_list = parse_ops(ops)
    size_list = sizes_or_fail(sizes, backend)
    if nproc is None:
        nproc = 2
        if backend == "nccl" and not nccl_unavailable():
            import torch

            nproc = torch.cuda.device_count()
    if backend == "nccl":
        why = nccl_unavailable(nproc)
        if why:
            raise click.ClickException(f"{why}; use --backend gloo to run on the CPU")
    args = ["--backend", backend, "--op", ",".join(op_list), "--sizes", ",".join(map(str, size_list)),
            "--iters", str(iters), "--warmup", str(warmup), "--timeout", str(timeout_s)]  # fmt: skip
    if threads:
        args += ["--threads", str(threads)]
    from gpuplay.collectives.cores import oversubscription

    crowded = oversubscription(nproc, threads, backend)
    if crowded:
        click.echo(f"warning: {crowded}", err=True)
    total = len(op_list) * len(size_list)
    done = 0

    def on_event(ev: dict[str, Any]) -> None:
        nonlocal done
        if ev.get("event") == "progress" and ev.get("rank") == 0:
            done += 1
            click.echo(f"[{done}/{total}] {ev.get('where')}", err=True)
        elif ev.get("event") == "joined" and ev.get("rank") == 0:
            click.echo(f"{nproc} {backend} ranks joined", err=True)

    try:
        doc = launch(nproc, args, timeout_s=timeout_s, port=port, on_event=on_event)
    except LaunchError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("interrupted: all ranks stopped", err=True)
        sys.exit(130)
    write_output(doc, fmt, out)
    if any(r.get("status") == "ok" and not r.get("check_ok") for r in doc["results"]):
        raise click.ClickException("a result was WRONG (see the check column)")


command = collectives
