"""The options both entry points share, and the per-rank entry point (`python -m gpuplay.collectives`).

Under torchrun every process runs `rank_main`; rank 0 prints the table (or JSON/CSV), writes --out
and appends to the session log. `gpuplay collectives` (gpuplay.cli.collectives) launches local
ranks of this same entry point.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gpuplay.collectives.backend import BACKENDS
from gpuplay.collectives.bandwidth import OPS
from gpuplay.collectives.report import FORMATS
from gpuplay.collectives.sizes import SizeError, parse_sizes
from gpuplay.core.storage.safetext import visible


def parse_ops(values: tuple[str, ...]) -> list[str]:
    ops: list[str] = []
    for v in values:
        for name in (p.strip() for p in v.split(",")):
            if not name:
                continue
            chosen = list(OPS) if name == "all" else [name]
            for op in chosen:
                if op not in OPS:
                    raise click.BadParameter(
                        f"unknown collective {op!r}; choose from {', '.join(OPS)} or all", param_hint="--op"
                    )
                if op not in ops:
                    ops.append(op)
    return ops or list(OPS)


def sizes_or_fail(text: str | None, backend: str) -> list[int]:
    from gpuplay.collectives.sizes import DEFAULT_CPU, DEFAULT_CUDA

    try:
        return parse_sizes(text or (DEFAULT_CUDA if backend == "nccl" else DEFAULT_CPU))
    except SizeError as exc:
        raise click.BadParameter(str(exc), param_hint="--sizes") from None


SWEEP_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--op",
        "ops",
        multiple=True,
        help=f"Collective(s), repeatable or comma-separated: {', '.join(OPS)}, all (default: all).",
    ),
    click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="torch.distributed backend (default: nccl where CUDA GPUs are, else gloo).",
    ),
    click.option(
        "--sizes",
        default=None,
        help="Message sizes (whole array, bytes with K/M/G): list 1K,1M,16M or range 1K:64M in powers "
        "of two. Default 1K:64M on gloo, 1K:1G on NCCL; sizes that do not fit in memory are skipped.",
    ),
    click.option(
        "--iters", type=click.IntRange(min=1), default=20, show_default=True, help="Timed iterations."
    ),
    click.option(
        "--warmup",
        type=click.IntRange(min=1),
        default=5,
        show_default=True,
        help="Warm-up iterations (the first is checked against the exact result).",
    ),  # fmt: skip
    click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=1),
        default=60.0,
        show_default=True,
        help="Seconds allowed for all ranks to join and for any one collective to complete.",
    ),
    click.option(
        "--threads",
        type=click.IntRange(min=1),
        default=None,
        help="torch threads per rank on gloo (default: cores / local ranks).",
    ),  # fmt: skip
    click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True),
    click.option(
        "--out",
        type=click.Path(dir_okay=False),
        default=None,
        callback=lambda c, p, v: _writable(v),
        help="Write the output here.",
    ),  # fmt: skip
]


def _writable(out: str | None) -> str | None:
    """An --out that cannot be written is refused before any rank starts, not after it measured."""
    from gpuplay.core.storage.writable import unwritable

    problem = unwritable(out) if out else ""
    if problem:
        raise click.BadParameter(f"cannot write {visible(out or '')}: {problem}", param_hint="'--out'")
    return out


def out_format(fmt: str, out: str | None) -> str:
    """--format, else what --out's suffix says (core/storage/writable.format_for_out); a
    contradiction (`--format csv --out r.json`) is a usage error before any rank starts."""
    from gpuplay.core.storage.writable import format_for_out

    ctx = click.get_current_context()
    given = ctx.get_parameter_source("fmt") is not click.core.ParameterSource.DEFAULT
    chosen, problem = format_for_out(fmt, given, out, FORMATS)
    if problem:
        raise click.UsageError(problem)
    return chosen


def sweep_options(f: Any) -> Any:
    for opt in reversed(SWEEP_OPTIONS):
        f = opt(f)
    return f


def write_output(doc: dict[str, Any], fmt: str, out: str | None) -> None:
    from gpuplay.collectives.report import append_session_log, render
    from gpuplay.core.storage.atomicfile import write_atomic

    text = render(doc, fmt)
    if out:
        try:
            write_atomic(Path(out), text)
        except OSError as exc:  # a full disk after all: the output goes to stdout, not lost
            click.echo(text, nl=not text.endswith("\n"))
            raise click.ClickException(
                f"cannot write {out}: {exc.strerror or exc}; printed to stdout instead"
            ) from None
        click.echo(f"wrote {out}", err=True)
    else:
        click.echo(text, nl=not text.endswith("\n"))
    logged = append_session_log(doc)
    click.echo(f"{'warning: ' if logged.startswith('session log') else 'session log: '}{logged}", err=True)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@sweep_options
@click.option("--results-json", type=click.Path(dir_okay=False), default=None, hidden=True)
def rank_main(
    ops: tuple[str, ...],
    backend: str | None,
    sizes: str | None,
    iters: int,
    warmup: int,
    timeout_s: float,
    threads: int | None,
    fmt: str,
    out: str | None,
    results_json: str | None,
) -> None:
    """One rank of a collectives sweep; run it under torchrun, e.g.

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 -m gpuplay.collectives
    """
    from gpuplay.collectives.backend import default_backend
    from gpuplay.collectives.bench import RankEnv, RankError, SweepOptions, emit_event, run_rank
    from gpuplay.collectives.report import to_json
    from gpuplay.core.storage.atomicfile import write_atomic

    fmt = out_format(fmt, out)
    backend = backend or default_backend()
    opts = SweepOptions(
        parse_ops(ops), sizes_or_fail(sizes, backend), backend, iters, warmup, timeout_s, threads
    )
    rank = os.environ.get("RANK", "0")
    try:
        renv = RankEnv.from_environ()
        rank = str(renv.rank)

        def progress(row: dict[str, Any]) -> None:
            if results_json is None and row.get("status") == "ok":
                s = row["summary"]
                click.echo(
                    f"{row['op']} {row['size_bytes']} B: median {s['median'] * 1e3:.3f} ms, "
                    f"busbw {row['busbw_gbs']:.3g} GB/s, check {'ok' if row['check_ok'] else 'WRONG'}",
                    err=True,
                )

        sweep = run_rank(opts, renv, on_row=progress)
    except RankError as exc:
        emit_event("error", rank=int(rank), message=str(exc), secondary=exc.secondary, kind=exc.kind)
        click.echo(f"gpuplay collectives: rank {rank}: {exc}", err=True)
        sys.exit(1)
    if sweep is None:
        return
    doc = sweep.to_dict()
    if results_json:
        write_atomic(Path(results_json), to_json(doc))
        return
    write_output(doc, fmt, out)
    if any(r.get("status") == "ok" and not r.get("check_ok") for r in doc["results"]):
        click.echo("gpuplay collectives: a result was WRONG (see the check column)", err=True)
        sys.exit(3)
