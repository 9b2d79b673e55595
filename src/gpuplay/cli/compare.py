"""`gpuplay compare`: every scenario on every available backend and device."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from gpuplay.cli import options
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import scenario_dirs_option
from gpuplay.cli.output import (
    ResultLog,
    load_scenarios,
    message,
    print_rows,
    progress_line,
    report_interruption,
    stderr_console,
)
from gpuplay.core.spec import BACKENDS, DTYPES, RunSpec, SpecError

if TYPE_CHECKING:
    from gpuplay.core.result import RunResult

FORMATS = ("table", "markdown", "json", "csv")


@click.command()
@click.option("--preset", "-p", default="quick", show_default=True)
@click.option(
    "--backends",
    default="numpy,torch,cupy",
    show_default=True,
    help="Comma-separated backends; unavailable ones are listed with the reason.",
)
@click.option("--scenario", "only", multiple=True, help="Only these scenarios (repeatable).")
@click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True)
@click.option(
    "--variants",
    default="base",
    show_default=True,
    help="Comma-separated torch levers per device: base, amp-bf16, amp-fp16, compile, tf32, graphs.",
)
@click.option("--budget", type=click.FloatRange(min=0.001), default=1.0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None)
@click.option("--max-step", type=click.FloatRange(min=0.001), default=30.0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None)
@scenario_dirs_option
def compare(
    preset: str,
    backends: str,
    only: tuple[str, ...],
    dtype: str,
    variants: str,
    budget: float,
    threads: int | None,
    max_step: float,
    fmt: str,
    out: str | None,
    scenario_dirs: tuple[str, ...],
) -> None:
    """Every scenario on every available backend and device, with speedups over NumPy on the CPU."""
    from gpuplay.core.compare import VARIANTS, attach_baselines, plan_compare, run_compare

    chosen = [b.strip() for b in backends.split(",") if b.strip()]
    bad = [b for b in chosen if b not in BACKENDS]
    if bad or not chosen:
        raise click.BadParameter(
            f"unknown backend(s) {', '.join(bad) or '(none)'}; choose from {', '.join(BACKENDS)}",
            param_hint="--backends",
        )
    vlist = [v.strip() for v in variants.split(",") if v.strip()]
    badv = [v for v in vlist if v not in VARIANTS]
    if badv or not vlist:
        raise click.BadParameter(
            f"unknown variant(s) {', '.join(badv) or '(none)'}; choose from {', '.join(VARIANTS)}",
            param_hint="--variants",
        )
    sset = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs))
    try:
        scenarios = [sset.get(n) for n in only] if only else list(sset.scenarios.values())
        for sc in scenarios:
            sc.preset_params(preset)
        specs, refused = plan_compare(
            scenarios,
            preset,
            chosen,
            dtype=dtype,
            variants=vlist,
            budget_s=budget,
            threads=threads,
            max_step_s=max_step,
        )
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    err = stderr_console()
    seen = set()
    for spec, why in refused:
        if (spec.backend, spec.device, str(why)) in seen:
            continue  # one line per reason: "CuPy is not installed" once, not per scenario
        seen.add((spec.backend, spec.device, str(why)))
        err.print(
            f"skipped {spec.label()} ({spec.scenario}): {why}", style="dim", highlight=False, markup=False
        )

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpuplay.core.telemetry import RunTelemetry

    log = ResultLog()
    # A live bar on a terminal; otherwise (a log file, CI) one plain line per measurement.
    plain = not err.is_terminal
    with (
        Interruption() as stop,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=plain,
        ) as progress,
    ):
        task = progress.add_task("compare", total=len(specs))
        done: list[RunResult] = []

        def on_start(i: int, spec: RunSpec) -> None:
            progress.update(task, description=f"{spec.scenario}: {spec.label()}")

        def on_result(i: int, r: RunResult) -> None:
            if stop.interrupted and r.status == "cancelled":
                return  # stopped by the signal: not a finished measurement
            done.append(r)
            log(r)
            progress.advance(task)
            if plain:
                err.print(progress_line(len(done), len(specs), r), highlight=False, markup=False)
            elif r.status in ("failed", "refused"):
                progress.console.print(
                    f"{r.status}: {r.spec.scenario} {r.spec.label()}: {r.message}",
                    style="yellow",
                    highlight=False,
                    markup=False,
                )

        run_compare(
            specs, cancel=stop.cancel, on_start=on_start, on_result=on_result, telemetry=RunTelemetry()
        )
    results = done
    rows = attach_baselines(results)
    print_rows(
        rows,
        fmt,
        out,
        title=f"gpuplay compare --preset {preset}",
        preset=preset,
        refused=[{"label": s.label(), "scenario": s.scenario, "reason": str(w)} for s, w in refused],
    )
    if stop.interrupted:
        report_interruption(stop.name, len(results), len(specs), log)
        sys.exit(stop.exit_code)


command = compare
