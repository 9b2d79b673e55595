"""`gpuplay compare`: every scenario on every available backend and device."""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING

import click

from gpuplay.cli import options
from gpuplay.cli.exitcodes import HELP as EXIT_HELP
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import FiniteFloat, scenario_dirs_option, threads_option
from gpuplay.cli.output import (
    ResultLog,
    load_scenarios,
    message,
    notice_printer,
    print_rows,
    progress_line,
    report_interruption,
    stderr_console,
)
from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.scenarios import DEFAULT_PRESET
from gpuplay.core.spec import BACKENDS, DTYPES, RunSpec, SpecError
from gpuplay.core.storage import argcheck, bounds
from gpuplay.core.storage.safetext import visible

if TYPE_CHECKING:
    from gpuplay.core.result import RunResult

FORMATS = ("table", "markdown", "json", "csv")


@click.command(epilog=EXIT_HELP)
@click.option(
    "--preset", "-p", default=None,
    help="A preset of the scenarios. [default: quick; a scenario without one runs its own parameters]",
)  # fmt: skip
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
    help=f"Comma-separated torch levers per device: {', '.join(levers.variants())}.",
)
@click.option("--budget", type=FiniteFloat(bounds.BUDGET_S), default=1.0, show_default=True)
@threads_option
@click.option("--max-step", type=FiniteFloat(bounds.MAX_STEP_S), default=30.0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=options.OutPath(), default=None)
@click.option(
    "--devices",
    default=None,
    help="all (every cuda:N), cpu, or a list (cuda:0,cuda:1): per-device medians side by side, a GPU >5% slower than its peers flagged.",
)
@click.option(
    "--concurrent/--sequential",
    default=False,
    help="With --devices: all devices at once, or one after another (default).",
)
@click.option(
    "--from",
    "from_files",
    is_flag=True,
    help="Merge result files (gpuplay run/compare --format json) given as arguments: one column per file.",
)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False), metavar="[SCENARIO]... | --from FILE...")
@scenario_dirs_option
def compare(
    preset: str | None,
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
    devices: str | None = None,
    concurrent: bool = False,
    from_files: bool = False,
    files: tuple[str, ...] = (),
) -> None:
    """Every scenario on every available backend and device, with speedups over NumPy on the CPU."""
    from gpuplay.cli import compare_more

    fmt = options.out_format(fmt, out, FORMATS)
    if files and not from_files:
        # `gpuplay compare matmul` reads as `run matmul` and `sweep matmul` do: names of scenarios
        # are --scenario; anything else was meant for --from, and the message says both ways.
        only = (*only, *_scenario_names(files, scenario_dirs))
        files = ()
    if from_files or files:
        return compare_more.compare_from(files, fmt, out)
    # `--devices ''` is a value, refused: it ran every scenario on every device
    device_list = compare_more.resolve(devices) if devices is not None else None
    from gpuplay.core.studies.compare import VARIANTS, attach_baselines, plan_compare, run_compare

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
    from gpuplay.core.engine.client import start_engine_early

    start_engine_early(("numpy", *chosen))  # overlaps loading the scenarios and planning
    sset = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs))
    try:
        scenarios = [sset.get(n) for n in only] if only else list(sset.scenarios.values())
        for sc in scenarios:
            sc.preset_params(sc.chosen_preset(preset))
        from gpuplay.core.engine.client import adopt_shared_probe

        adopt_shared_probe(30.0, final="cupy" in chosen, backends=("numpy", *chosen))
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
    if device_list is not None:
        refused = [(s, w) for s, w in refused if s.device in device_list]
    seen = set()
    # Said on stderr as planned when the output goes elsewhere (a file, JSON, CSV); they are part
    # of that output too, and of the terminal table, below it (print_rows' `skipped`).
    for spec, why in refused if (out or fmt != "table") else ():
        if (spec.backend, spec.device, str(why)) in seen:
            continue  # one line per reason: "CuPy is not installed" once, not per scenario
        seen.add((spec.backend, spec.device, str(why)))
        err.print(
            f"skipped {spec.label()} ({spec.scenario}): {why}", style="dim", highlight=False, markup=False
        )

    if device_list is not None:
        return compare_more.compare_devices(specs, device_list, concurrent, fmt, out)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
                    visible(f"{r.status}: {r.spec.scenario} {r.spec.label()}: {r.message}"),
                    style="yellow",
                    highlight=False,
                    markup=False,
                )

        from gpuplay.core.engine import measure

        run_compare(
            specs,
            cancel=stop.cancel,
            on_start=on_start,
            on_result=on_result,
            measure=functools.partial(measure, on_notice=notice_printer(progress.console)),
        )
    results = done
    rows = attach_baselines(results)
    print_rows(
        rows,
        fmt,
        out,
        title=f"gpuplay compare --preset {preset or DEFAULT_PRESET}",
        preset=preset or DEFAULT_PRESET,
        skipped=refused,
        refused=[{"label": s.label(), "scenario": s.scenario, "reason": str(w)} for s, w in refused],
    )
    if stop.interrupted:
        report_interruption(stop.name, len(results), len(specs), log)
        sys.exit(stop.exit_code)
    from gpuplay.cli.exitcodes import exit_if_checks_failed, exit_if_runs_failed

    exit_if_runs_failed(results)
    exit_if_checks_failed(results, err)


def _scenario_names(args: tuple[str, ...], scenario_dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Arguments given without --from, each a scenario's name; otherwise a usage error saying what
    to type for either meaning."""
    known = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs)).scenarios
    unknown = [a for a in args if a not in known]
    if unknown:
        hint = argcheck.did_you_mean(unknown[0], known)
        raise click.UsageError(
            f"{visible(unknown[0])!r} is not a scenario{hint or '.'} To compare scenarios name them "
            "(gpuplay compare matmul svd, or --scenario NAME; gpuplay list shows them); to merge "
            "result files: gpuplay compare --from A.json B.json"
        )
    return args


command = compare
