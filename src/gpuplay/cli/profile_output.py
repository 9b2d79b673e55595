"""`gpuplay run --profile`: profile the run's configuration and print what torch.profiler saw."""

from __future__ import annotations

import json
from typing import Any

import click

from gpuplay.cli.output import esc, plain
from gpuplay.core.measure.torchprof import counted_words
from gpuplay.core.storage.safetext import visible


def _ms(x: Any) -> str:
    return "—" if x is None else f"{x:.3f}"


def profile_and_print(spec: Any, trace: str | None, fmt: str) -> bool:
    """Profile `spec` (a few steps), print the summary on stdout; False when it could not run."""
    from rich.table import Table

    from gpuplay.cli.output import spinner, stderr_console, stdout_console
    from gpuplay.core.runner.profile import profile_spec

    err = stderr_console()
    with spinner(err, f"profiling {spec.label()} …"):
        data = profile_spec(spec, trace=trace)
    if data["status"] != "ok":
        err.print(
            visible(f"profile {data['status']}: {data['label']}: {data['message']}"),
            style="red",
            markup=False,
        )
        return False
    if fmt != "table":
        click.echo(json.dumps({"profile": data}, default=str))
        return True
    out = stdout_console()
    share = data["overhead_share"]
    out.print(
        f"[b]Profile[/] {data['label']} at {data['size']} · {data['tool']} · {data['steps']} steps\n"
        f"  {data['wall_ms_per_step']:.3f} ms per step · {_ms(data['busy_ms_per_step'])} ms in "
        f"{'kernels' if 'cuda' in data['activities'] else 'operators'} · "
        f"{'—' if data['kernels_per_step'] is None else format(data['kernels_per_step'], 'g')} "
        f"{counted_words(data['kernels_per_step'], str(data['kernels_counted']))}\n"
        f"  overhead {'—' if share is None else f'{share:.0%}'}: {data['overhead_definition']}",
        highlight=False,
    )
    gpu = ("device_ms",) if "cuda" in data["activities"] else ()  # no GPU column on a CPU run
    for key, title, cols in (
        ("top_ops", "Top operators (per step)", ("calls", "self_cpu_ms", "cpu_total_ms", *gpu)),
        ("top_kernels", "Top kernels (per step)", ("calls", "device_ms")),
    ):
        if not data[key]:
            continue
        table = Table(title=title, title_justify="left")
        table.add_column("name", overflow="fold", max_width=60)
        for c in cols:
            table.add_column(c, justify="right")
        for row in data[key]:
            table.add_row(plain(row["name"]), *(f"{row[c]:.3g}" for c in cols))  # names may hold [ ]
        out.print(table)
    if data.get("trace"):
        err.print(
            f"wrote Chrome trace {esc(data['trace'])} (open in Perfetto or chrome://tracing)", highlight=False
        )
    if data.get("trace_error"):
        err.print(visible(data["trace_error"]), style="red", markup=False)
        return False
    return True
