"""`gpuplay tune`: the levers checklist on one target, one change at a time, each one proved."""

from __future__ import annotations

import csv
import io
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from gpuplay.cli import options
from gpuplay.cli.exitcodes import HELP as EXIT_HELP
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import FiniteFloat, parse_assignments, scenario_dirs_option
from gpuplay.cli.output import ResultLog, emit, load_scenarios, message, notice_printer, stderr_console
from gpuplay.core.spec import Refusal, SpecError
from gpuplay.core.storage.safetext import visible

if TYPE_CHECKING:
    from gpuplay.core.studies.tune import Ladder, Rung

FORMATS = ("table", "markdown", "json", "csv")
BUDGET_TOTAL_S = (5.0, 3600.0)


@click.command(epilog=EXIT_HELP)
@click.argument("target", metavar="SCENARIO|FILE.py")
@click.option(
    "--device", "-d", default=None, help="Where the ladder climbs to. [default: the best device here]"
)
@click.option(
    "--preset", "-p", default=None, help="quick, published, default (its [params]), or one it defines."
)
@click.option(
    "--size", "-s", "sizes", multiple=True, metavar="NAME=VALUE", help="Set a parameter, e.g. -s n=2048."
)
@click.option(
    "--budget-total",
    type=FiniteFloat(BUDGET_TOTAL_S),
    default=120.0,
    show_default=True,
    help="Seconds for the whole ladder, compile and build time included, split over the rungs.",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=options.OutPath(), default=None, help="Write to a file instead of stdout.")
@scenario_dirs_option
def tune(
    target: str,
    device: str | None,
    preset: str | None,
    sizes: tuple[str, ...],
    budget_total: float,
    fmt: str,
    out: str | None,
    scenario_dirs: tuple[str, ...],
) -> None:
    """Climb the levers checklist on a scenario or your code file: each rung one change on top
    of the best configuration so far, timed in interleaved pairs against it, kept only when its
    speedup's 95% interval lies above 1 and it passes the float64 check.

    The order is fixed (a rung's gain depends on the rungs below it): baseline, device,
    inference_mode, AMP bf16 then fp16, TF32, torch.compile default → reduce-overhead →
    max-autotune, CUDA graphs, then the workload's own (attention backend, linalg library,
    inference runtimes, loader workers and pinned memory). Ctrl+C keeps the finished rungs.
    """
    from gpuplay.core.engine.client import adopt_shared_probe, start_engine_early

    start_engine_early(("numpy", "torch"))
    from gpuplay.core.catalogue.scenarios import code_scenario, spec_for
    from gpuplay.core.studies import tune as ladder_mod

    try:
        sc = code_scenario(target)
        if sc is None:
            sc = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs)).get(target)
        spec, _size = spec_for(sc, preset, parse_assignments(sizes))
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    gpu = device not in (None, "cpu")
    adopt_shared_probe(30.0, final=gpu or device is None, backends=("numpy", "torch"))
    if device is None:
        device = ladder_mod.best_device()
    from gpuplay.core.catalogue.planner import device_refusal

    refusal = device_refusal("torch", device, 30.0)
    if isinstance(refusal, Refusal):
        raise click.UsageError(visible(f"device {device}: {refusal}"))
    try:
        ladder = ladder_mod.plan_ladder(spec, device, sc.name, budget_total)
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    err = stderr_console()

    def say(text: str, style: str = "") -> None:
        err.print(visible(text), style=style, highlight=False, markup=False, soft_wrap=True)

    say(f"tune {sc.name} on {device}; the order is fixed: {ladder_mod.ORDER}")
    say(ladder.budget_line())
    log = ResultLog()

    def on_start(i: int, rung: Rung) -> None:
        share = f", share {rung.share_s:.0f} s" if rung.share_s else ""
        say(f"  {rung.name}: {rung.configuration}{share} …", "dim")

    def on_rung(i: int, rung: Rung) -> None:
        if rung.result is not None and rung.result.status != "cancelled":
            log(rung.result)
        cells = ladder_mod.rung_cells(rung)
        say(f"  {rung.name}: " + f"{cells[2]} {cells[3]} → {cells[-1]}".replace("\n", " "))

    from gpuplay.core.engine import measure

    with Interruption() as stop:

        def measured(spec: Any, **kw: Any) -> Any:
            return measure(spec, on_notice=notice_printer(err), **kw)

        ladder_mod.run_ladder(
            ladder,
            measured,
            cancel=stop.cancel,
            on_rung=on_rung,
            on_start=on_start,
            profile=ladder_mod.engine_profile,
        )
        if ladder.total is not None and ladder.total.result is not None:
            log(ladder.total.result)
    if stop.interrupted:
        ladder.interrupted = True
    _print(ladder, fmt, out)
    if stop.interrupted:
        where = f"; logged to {log.log.path}" if log.log.path.exists() else ""
        say(f"interrupted by {stop.name}: the finished rungs are kept{where}", "yellow")
        sys.exit(stop.exit_code)
    if ladder.baseline.status != "measured":
        say(f"the baseline did not run: {ladder.baseline.reason}", "red")
        sys.exit(1)


def _print(ladder: Ladder, fmt: str, out: str | None) -> None:
    from gpuplay.core.studies.tune import COLUMNS, table_rows

    rows = table_rows(ladder)
    if fmt == "json":
        emit(json.dumps(ladder.to_dict(), indent=2, default=str, allow_nan=False) + "\n", out)
    elif fmt == "csv":
        emit(_csv(ladder), out)
    elif fmt == "markdown":
        esc = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in rows]  # one line a row
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(visible(c) for c in row) + " |" for row in esc]
        emit("\n".join([*lines, "", visible(ladder.verdict), ""]), out)
    else:
        emit(_table_text(ladder, rows, COLUMNS, out is not None), out)


def _table_text(ladder: Ladder, rows: list[list[str]], columns: tuple[str, ...], to_file: bool) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from gpuplay.cli.output import plain, stdout_console

    table = Table(
        title=visible(f"gpuplay tune {ladder.target} on {ladder.device}"),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        expand=True,
    )
    wrap = {"configuration": 2, "outcome": 3}  # the words wrap; the figures stay whole
    width = 160 if to_file else stdout_console().width
    # Narrower than all of them, the figures' columns stay whole and the wrapping ones were
    # squeezed to nothing at 80 columns (no outcome: kept or dropped unseen). The rung names the
    # change, so its configuration goes first, then cumulative and error (the verdict gives the
    # total, the outcome says when a kept rung changes numerics).
    dropped = (
        () if width >= 140 else ("configuration",) if width >= 100 else ("configuration", "cumul.", "error")
    )
    keep = [i for i, c in enumerate(columns) if c not in dropped]
    columns = tuple(columns[i] for i in keep)
    rows = [[row[i] for i in keep] for row in rows]
    for c in columns:
        if c in wrap:
            table.add_column(c, ratio=wrap[c], overflow="fold")
        else:
            table.add_column(c, no_wrap=True, justify="right" if c != "rung" else "left")
    for row in rows:
        table.add_row(*(plain(c) for c in row))
    buf = io.StringIO()
    con = Console(file=buf, width=max(80, width), no_color=True, highlight=False)
    con.print(table)
    con.print(plain(ladder.verdict), soft_wrap=True)
    return buf.getvalue()


def _csv(ladder: Ladder) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    keys = ("name", "configuration", "status", "kept", "reason", "median", "speedup", "interval",
            "cumulative", "error", "tolerance", "compile_s", "build_s", "share_s")  # fmt: skip
    w.writerow(keys)
    for r in ladder.rungs:
        d = r.to_dict()
        iv = d["interval"]
        d["interval"] = f"{iv[0]:.6g}-{iv[1]:.6g}" if iv else ""
        w.writerow([visible("" if d[k] is None else str(d[k])) for k in keys])
    return buf.getvalue()


command = tune
