"""`gpuplay sweep`: when does the GPU pay off? Each configuration timed at each size of one parameter."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click

from gpuplay.cli import options
from gpuplay.cli.exitcodes import HELP as EXIT_HELP
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import scenario_dirs_option, threads_option
from gpuplay.cli.output import (
    BusyNotice,
    ResultLog,
    emit,
    load_scenarios,
    message,
    notice_printer,
    report_interruption,
    stderr_console,
)
from gpuplay.core.catalogue import levers
from gpuplay.core.spec import BACKENDS, DTYPES, SpecError, pick_names

FORMATS = ("table", "json", "csv", "markdown")


def _names(text: str, allowed: tuple[str, ...] | None, hint: str) -> list[str]:
    try:
        return pick_names(text, allowed)
    except SpecError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


@click.command(epilog=EXIT_HELP)
@click.argument("scenario", metavar="SCENARIO|FILE.py")
@click.option("--over", "over", required=True, metavar="PARAM=V1,V2,…|LO..HI[:K]",
              help="The parameter to sweep: a list, LO..HI (doubling from LO), or LO..HI:K (K sizes, geometric).")  # fmt: skip
@click.option("--backends", default="numpy,torch", show_default=True, help="Comma-separated backends.")
@click.option("--devices", "-d", default="cpu", show_default=True, help="Comma-separated: cpu, cuda, cuda:N.")
@click.option("--dtypes", "--dtype", "dtypes", default="float32", show_default=True,
              help="Comma-separated dtypes, e.g. float32,float64.")  # fmt: skip
@click.option("--variants", default="base", show_default=True,
              help=f"Torch levers, comma-separated: {', '.join(levers.variants())}.")  # fmt: skip
@click.option("--transfers", type=click.Choice(("off", "on", "both")), default="off", show_default=True,
              help="On a GPU: time host↔device copies inside each step; both: two lines.")  # fmt: skip
@click.option("--preset", "-p", default=None, help="The other parameters' preset. [default: quick; a "
              "scenario or code file without one runs its own parameters]")  # fmt: skip
@click.option("--budget", type=click.FloatRange(min=0.001), default=0.5, show_default=True,
              help="Seconds of timed steps per size and configuration.")  # fmt: skip
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@threads_option
@click.option("--max-step", type=click.FloatRange(min=0.001), default=10.0, show_default=True,
              help="Stop a configuration at the first size whose step is estimated longer (seconds).")  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=options.OutPath(), default=None, help="Write to a file instead of stdout.")
@click.option(
    "--progress-json", is_flag=True, hidden=True, help="One JSON object per point on stderr (the app)."
)
@scenario_dirs_option
def sweep(
    scenario: str,
    over: str,
    backends: str,
    devices: str,
    dtypes: str,
    variants: str,
    transfers: str,
    preset: str | None,
    budget: float,
    warmup: int,
    threads: int | None,
    max_step: float,
    fmt: str,
    out: str | None,
    progress_json: bool,
    scenario_dirs: tuple[str, ...],
) -> None:
    """Time each configuration at each size, smallest first: where does one overtake another?

    \b
    gpuplay sweep matmul --over n=32..512 --backends numpy,torch
    gpuplay sweep matmul --over n=64..8192 --backends numpy,torch,cupy -d cpu,cuda --transfers both
    """
    from gpuplay.cli.run import _code_scenario

    fmt = options.out_format(fmt, out, FORMATS)
    from gpuplay.core.studies.sweep import VARIANTS, SweepError, parse_over, plan_sweep, sweep_values

    chosen = _names(backends, BACKENDS, "--backends")
    from gpuplay.core.engine.client import start_engine_early

    start_engine_early(("numpy", *chosen))  # overlaps loading the scenarios and planning
    devs = _names(devices, None, "--devices")
    busy = BusyNotice(stderr_console())
    for d in dict.fromkeys(("cpu", *devs)):  # a wait for a device is said at once, before any loading
        busy.now(d)
    dts = _names(dtypes, DTYPES, "--dtypes")
    vs = _names(variants, tuple(VARIANTS), "--variants")
    try:
        param, text = parse_over(over)
        sc = _code_scenario(scenario) or load_scenarios(
            options.scenario_dirs(click.get_current_context(), scenario_dirs)
        ).get(scenario)
        values = sweep_values(sc, param, text)
        from gpuplay.core.engine.client import adopt_shared_probe

        adopt_shared_probe(30.0, final="cupy" in chosen or any(d != "cpu" for d in devs),
                           backends=("numpy", *chosen))  # fmt: skip
        plan = plan_sweep(sc, param, values, chosen, devs, preset=preset, dtypes=dts, variants=vs,
                          transfers=transfers, budget_s=budget, warmup=warmup, threads=threads,
                          max_step_s=max_step)  # fmt: skip
    except SweepError as exc:
        raise click.BadParameter(str(exc), param_hint="--over") from None
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    err = stderr_console()
    for label, why in plan.refused:
        err.print(f"refused {label}: {why}", style="yellow", highlight=False, markup=False)
    if not plan.series:
        err.print("nothing to sweep: every configuration was refused", style="red", highlight=False)
        sys.exit(1)
    _progress(progress_json, {"plan": {"param": param, "values": values,
                                       "series": [s.label for s in plan.series]}})  # fmt: skip
    done = _measure(plan, err, progress_json, busy)
    _print(plan, fmt, out)
    if done.interrupted:
        report_interruption(done.name, sum(len(s.points) for s in plan.series), plan.total, done.log)
        sys.exit(done.exit_code)
    # A refusal or out-of-memory at a size is where a series stops growing (said on stderr, not an
    # error); a point that raised, or a series with nothing measured, is an error: exit 1.
    crashed = any(p.status == "failed" and getattr(p.result, "failure", None) != "out-of-memory"
                  for s in plan.series for p in s.points)  # fmt: skip
    if crashed or any(not any(p.status == "ok" for p in s.points) for s in plan.series):
        sys.exit(1)
    from gpuplay.cli.exitcodes import exit_if_checks_failed

    exit_if_checks_failed((p.result for s in plan.series for p in s.points), err)


class _Done:
    def __init__(self, stop: Interruption, log: ResultLog) -> None:
        self.interrupted, self.name, self.exit_code, self.log = (
            stop.interrupted, stop.name, stop.exit_code, log)  # fmt: skip


def _progress(enabled: bool, event: dict[str, Any]) -> None:
    if enabled:  # one line per event, flushed: the app reads them as they come
        print(json.dumps(event, default=str), file=sys.stderr, flush=True)


def _measure(plan: Any, err: Any, progress_json: bool, busy: BusyNotice) -> _Done:
    from gpuplay.core.engine import measure as measure_one

    # A finished point's session-log line and progress line (~1-2 ms: its summary, the line's JSON,
    # the write) wait until the next point's request has left: they are written when the engine's
    # first phase for it is heard, while it plans and sets up, not before it is asked.
    pending: list[tuple[Any, Any]] = []

    def on_phase(name: str, detail: str) -> None:
        busy.on_phase(name, detail)  # a wait for the device is said first
        report_pending()

    # A wait for the device is said (on_phase), and so is a step over its limit (on_notice).
    measure = functools.partial(measure_one, on_phase=on_phase, on_notice=notice_printer(err))
    from gpuplay.core.reports.report import fmt_time
    from gpuplay.core.studies.sweep import run_sweep

    log = ResultLog()
    total, count, started = plan.total, 0, 0
    plain = progress_json or not err.is_terminal
    status = err.status("sweeping …") if not plain else None

    def on_start(series: Any, value: Any) -> None:
        nonlocal started
        started += 1
        if status is not None:
            status.update(f"[{started}/{total}] {series.label} at {plan.param}={value} …")

    def report(series: Any, point: Any) -> None:
        nonlocal count
        count += 1
        if point.result is not None:
            log(point.result)
        if progress_json:
            _progress(True, {"point": {"series": series.label, **point.to_dict()}})
        elif plain:
            what = fmt_time(point.median) if point.median else f"{point.status}: {point.message}"
            err.print(f"[{count}/{total}] {series.label} {plan.param}={point.value}: {what}",
                      highlight=False, markup=False)  # fmt: skip
        if series.stopped:
            err.print(f"{series.label}: {series.stopped}", style="yellow", highlight=False, markup=False)

    def report_pending() -> None:
        while pending:
            report(*pending.pop(0))

    with Interruption() as stop:
        if status is not None:
            status.start()
        try:
            # No telemetry here: the engine opens its window (in-process: `measure` does).
            run_sweep(plan, measure, cancel=stop.cancel, on_start=on_start,
                      on_point=lambda series, point: pending.append((series, point)))  # fmt: skip
        finally:
            if status is not None:
                status.stop()
            report_pending()  # the last point, and any a stop left waiting
    report_pending()  # what a second signal cut short
    plan.interrupted = plan.interrupted or stop.interrupted
    return _Done(stop, log)


def _print(plan: Any, fmt: str, out: str | None) -> None:
    from gpuplay.core.reports import sweepreport
    from gpuplay.core.reports.report import environment

    doc = sweepreport.document(plan.to_dict(), environment())
    if fmt == "json":
        emit(sweepreport.to_json(doc), out)
    elif fmt == "csv":
        emit(sweepreport.to_csv(doc["sweep"]), out)
    elif fmt == "markdown" or out:
        emit(sweepreport.to_markdown(doc["sweep"], doc["environment"]), out)
    else:
        print_table(doc)


def print_table(doc: dict[str, Any]) -> None:
    """The sweep on a terminal: sizes down, configurations across; fits and crossovers below."""
    from rich.table import Table
    from rich.text import Text

    from gpuplay.cli.output import stdout_console
    from gpuplay.core.reports import sweepreport as sr
    from gpuplay.core.reports.report import error_reference

    sweep = doc["sweep"]
    series = sweep.get("series") or []
    table = Table(title=f"{sweep.get('scenario')}: time per step against {sweep.get('param')}",
                  header_style="bold", box=None, pad_edge=False, padding=(0, 2, 0, 0))  # fmt: skip
    table.add_column(Text(str(sweep.get("param"))), justify="right", no_wrap=True)
    for s in series:
        table.add_column(Text(str(s.get("label"))), justify="right")
    for v, points in sr.rows(sweep):
        table.add_row(sr.fmt_value(v), *(Text(sr.cell(p)) for p in points))
    con = stdout_console(table)
    con.print(table)
    con.print(f"{sr.machine_text(doc)} · medians after warm-up, "
              "± half the IQR · each size a full measurement, checked against "
              f"{error_reference([str(sweep.get('workload') or '')])}",
              style="dim", highlight=False, markup=False)  # fmt: skip
    unstable = [p for s in series for p in s.get("points") or [] if p.get("unstable")]
    if unstable:
        from gpuplay.core.measure.noise import UNSTABLE_REL_IQR, unstable_advice

        shortest = min((p["median"] for p in unstable if p.get("median")), default=None)
        con.print(f"⚠ {len(unstable)} unstable point(s): the IQR is over {100 * UNSTABLE_REL_IQR:.0f}% of "
                  f"the median; {unstable_advice(shortest)}", style="yellow", highlight=False, markup=False)  # fmt: skip
    for s in series:
        line = Text(f"{s.get('label')}: ", style="bold")
        line.append(sr.fit_text(s.get("fit")))
        con.print(line)
        if s.get("stopped"):
            con.print(f"  {s['stopped']}", style="yellow", highlight=False, markup=False)
    for c in sweep.get("crossovers") or []:
        con.print(Text("crossover: ", style="bold cyan") + Text(sr.crossover_text(c)))


command = sweep


def print_merged(files: Any, fmt: str, out: str | None) -> None:
    """`gpuplay compare --from` with sweep files: every file's series on one axis."""
    from pathlib import Path

    from gpuplay.core.reports import sweepreport as sr

    try:
        docs = [sr.load_sweep(f) for f in files]
        names = [Path(f).stem for f in files]
        if len(set(names)) < len(names):
            names = [str(f) for f in files]
        merged = sr.merge_sweeps(docs, names)
    except sr.SweepFileError as exc:
        raise click.UsageError(str(exc)) from None
    doc = {"kind": sr.KIND, "environments": {n: d.get("environment") for n, d in zip(names, docs, strict=True)},
           "sweep": merged}  # fmt: skip
    if fmt == "json":
        emit(sr.to_json(doc), out)
    elif fmt == "csv":
        emit(sr.to_csv(merged), out)
    elif fmt == "markdown" or out:
        emit(sr.to_markdown(merged, sr.machine_text(doc)), out)
    else:
        print_table(doc)
