"""`gpuplay run`: one scenario in one configuration."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpuplay.cli import options
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import parse_assignments, pop_spec_fields, scenario_dirs_option, spec_options
from gpuplay.cli.output import (
    ResultLog,
    load_scenarios,
    message,
    print_rows,
    progress_line,
    report_interruption,
    stderr_console,
)
from gpuplay.core.spec import Refusal, SpecError

FORMATS = ("table", "json", "csv")


@click.command()
@click.argument("scenario")
@spec_options
@click.option("--preset", "-p", default=None, help="quick, published, or a preset the scenario defines.")
@click.option(
    "--size", "-s", "sizes", multiple=True, metavar="NAME=VALUE", help="Set a parameter, e.g. -s n=2048."
)
@click.option(
    "--baseline/--no-baseline", default=False, help="Also run NumPy on the CPU and show the speedup."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option(
    "--out", type=click.Path(dir_okay=False), default=None, help="Write to a file instead of stdout."
)
@scenario_dirs_option
def run(
    scenario: str,
    preset: str | None,
    sizes: tuple[str, ...],
    baseline: bool,
    fmt: str,
    out: str | None,
    scenario_dirs: tuple[str, ...],
    **kw: Any,
) -> None:
    """Time one scenario in one configuration."""
    from gpuplay.core.compare import attach_baselines, baseline_spec, is_baseline
    from gpuplay.core.runner import run as run_spec
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.workloads import get_workload

    sset = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs))
    try:
        sc = sset.get(scenario)
        params = {**sc.preset_params(preset), **parse_assignments(sizes)}
        params = get_workload(sc.workload).resolve(params)
        spec = RunSpec.make(sc.workload, params, scenario=sc.name, **pop_spec_fields(kw))
        size = get_workload(sc.workload).size_label(params)
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    err = stderr_console()
    # Refuse first: a configuration that cannot run here must not cost a baseline measurement.
    from gpuplay.core.planner import check
    from gpuplay.core.result import RunResult

    verdict = check(spec, probe_timeout=30.0)
    if isinstance(verdict, Refusal):
        results = [RunResult(spec=spec, status="refused", message=str(verdict), size=size)]
        specs = []
    else:
        results, specs = [], [spec]
        if baseline and not is_baseline(spec):
            specs.insert(0, baseline_spec(spec))
    from gpuplay.core.telemetry import RunTelemetry

    telemetry = RunTelemetry()
    log = ResultLog()
    quiet = not err.is_terminal
    with Interruption() as stop:
        for i, s in enumerate(specs, 1):
            if stop.interrupted:
                break
            with err.status(f"running {s.label()} …"):
                r = run_spec(s, cancel=stop.cancel, telemetry=telemetry)
            if stop.interrupted and r.status == "cancelled":
                break  # the measurement the signal stopped is not a finished one
            results.append(r)
            log(r)
            if quiet:
                err.print(progress_line(i, len(specs), r), highlight=False, markup=False)
    rows = attach_baselines(results)
    print_rows(rows, fmt, out, title=f"{sc.title} ({results[-1].size if results else size})")
    if stop.interrupted:
        report_interruption(stop.name, len(results), len(specs), log)
        sys.exit(stop.exit_code)
    failed = [r for r in results if r.status in ("failed", "refused")]
    for r in failed:
        err.print(f"{r.status}: {r.spec.label()}: {r.message}", style="red", highlight=False, markup=False)
    if failed:
        sys.exit(1)


command = run
