"""`gpuplay run`: one scenario in one configuration."""

from __future__ import annotations

import sys
from typing import Any

import click

from gpuplay.cli import options
from gpuplay.cli.exitcodes import HELP as EXIT_HELP
from gpuplay.cli.interrupt import Interruption
from gpuplay.cli.options import parse_assignments, pop_spec_fields, scenario_dirs_option, spec_options
from gpuplay.cli.output import (
    BusyNotice,
    ResultLog,
    load_scenarios,
    message,
    notice_printer,
    print_rows,
    progress_line,
    report_interruption,
    spinner,
    stderr_console,
    warm_for_results,
)
from gpuplay.core.spec import Refusal, SpecError
from gpuplay.core.storage.safetext import visible

FORMATS = ("table", "markdown", "json", "csv")


@click.command(epilog=EXIT_HELP)
@click.argument("scenario", metavar="SCENARIO|FILE.py")
@spec_options
@click.option(
    "--preset", "-p", default=None, help="quick, published, default (its [params]), or one it defines."
)
@click.option(
    "--size", "-s", "sizes", multiple=True, metavar="NAME=VALUE", help="Set a parameter, e.g. -s n=2048."
)
@click.option(
    "--baseline/--no-baseline", default=False, help="Also run NumPy on the CPU and show the speedup."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--out", type=options.OutPath(), default=None, help="Write to a file instead of stdout.")
@click.option(
    "--profile", is_flag=True, help="Then profile a few steps: top ops, kernels per step, overhead."
)
@click.option(
    "--trace", type=click.Path(dir_okay=False), default=None, help="With --profile: Chrome trace file."
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
    profile: bool,
    trace: str | None,
    **kw: Any,
) -> None:
    """Time one scenario, or your own code file, in one configuration.

    FILE.py defines step(xp, *arrays) and inputs(rng, **params); it runs with your
    rights, like `python FILE.py` (see docs/your-code.md).
    """
    from gpuplay.core.engine.client import start_engine_early
    from gpuplay.core.measure import trace as tracing  # `trace` is the --trace option

    tracing.mark("run: command parsed")
    fmt = options.out_format(fmt, out, FORMATS)
    # The engine's interpreter and imports overlap the scenarios' loading and the planning below.
    needs = (kw.get("backend") or "numpy", *(("numpy",) if baseline else ()))
    start_engine_early(needs)
    from gpuplay.core.catalogue.scenarios import spec_for
    from gpuplay.core.engine import measure as run_spec
    from gpuplay.core.studies.compare import attach_baselines, baseline_spec, is_baseline

    try:
        sc = _code_scenario(scenario)
        if sc is None:
            sc = load_scenarios(options.scenario_dirs(click.get_current_context(), scenario_dirs)).get(
                scenario
            )
        spec, size = spec_for(sc, preset, parse_assignments(sizes), **pop_spec_fields(kw))
        spec = _needed_backend(spec)
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(message(exc)) from None
    tracing.mark("run: scenario loaded")
    err = stderr_console()
    # Refuse first: a configuration that cannot run here must not cost a baseline measurement.
    from gpuplay.core.catalogue.planner import check
    from gpuplay.core.engine.client import adopt_shared_probe
    from gpuplay.core.result import RunResult

    busy = BusyNotice(err)
    busy.now(spec.device)  # a wait for the device is said at once, not after the engine starts
    warm_for_results()  # while the engine still imports: its answer is read at once
    # with the backend the parameters switched to (inference's runtime, the dataloader: torch)
    adopt_shared_probe(30.0, final=spec.backend == "cupy", backends=(*needs, spec.backend))
    verdict = check(spec, probe_timeout=30.0)
    tracing.mark("run: planned")
    if isinstance(verdict, Refusal):
        results, specs = [RunResult(spec=spec, status="refused", message=str(verdict), size=size)], []
    else:
        results, specs = [], [spec]
        baseline = baseline and not is_baseline(spec) and _baseline_runs(spec, err)
        if baseline:
            specs.insert(0, baseline_spec(spec))
    log = ResultLog()
    quiet = not err.is_terminal

    def done(r: RunResult) -> None:
        results.append(r)
        log(r)
        if quiet:
            err.print(progress_line(len(results), len(specs), r), highlight=False, markup=False)

    with Interruption() as stop:
        if specs:
            with spinner(err, f"running {spec.label()} …"):
                # With --baseline one paired measurement gives both rows: the configuration is
                # timed in interleaved pairs with NumPy (its speedup), and NumPy's row is that
                # baseline side's own result (core/runner/paired.py), not a second measurement.
                base: list[RunResult] = []
                r = run_spec(
                    spec,
                    cancel=stop.cancel,
                    paired_with=specs[0] if baseline else None,
                    on_phase=busy.on_phase,
                    on_notice=notice_printer(err),
                    on_baseline=base.append,
                )
            if baseline and not base and not stop.interrupted and r.status != "cancelled":
                # No baseline from the pairs (the configuration failed or was refused first):
                # NumPy's row is measured alone, as before the pairing.
                with spinner(err, f"running {specs[0].label()} …"):
                    base.append(run_spec(specs[0], cancel=stop.cancel, on_phase=busy.on_phase,
                                         on_notice=notice_printer(err)))  # fmt: skip
            if not (profile or trace):
                # Nothing more to measure: the engine exits while the results are logged and
                # the table printed, not after them.
                from gpuplay.core.engine.client import release_shared

                release_shared()
            for b in base:
                if not (stop.interrupted and b.status == "cancelled"):
                    done(b)
            if not (stop.interrupted and r.status == "cancelled"):  # a stopped one is not finished
                done(r)
    tracing.mark("run: measured")
    rows = attach_baselines(results)
    print_rows(rows, fmt, out, title=f"{sc.title} ({results[-1].size if results else size})")
    tracing.mark("run: printed")
    if stop.interrupted:
        report_interruption(stop.name, len(results), len(specs), log)
        sys.exit(stop.exit_code)
    failed = [r for r in results if r.status in ("failed", "refused")]
    for r in failed:
        err.print(
            # A step past its limit says so first: "stopped: a step ran past its limit of 1 s (--max-step): …"
            visible(
                r.message if r.failure == "step-timeout" else f"{r.status}: {r.spec.label()}: {r.message}"
            ),
            style="red",
            highlight=False,
            markup=False,
        )
        if r.detail:
            err.print(visible(r.detail), style="red", highlight=False, markup=False, soft_wrap=True)
    if failed:
        sys.exit(1)
    if profile or trace:
        from gpuplay.cli.profile_output import profile_and_print

        if not profile_and_print(spec, trace, fmt):
            sys.exit(1)
    from gpuplay.cli.exitcodes import exit_if_checks_failed

    exit_if_checks_failed(results, err)


def _baseline_runs(spec: Any, err: Any) -> bool:
    """Whether --baseline's NumPy run can run. A workload with no NumPy form (the dataloader is
    torch's DataLoader) has no NumPy baseline: one line says so and the run goes on unpaired with
    exit 0, as gpuplay.run does (core/runner/paired.py notes "no speedup")."""
    from gpuplay.core.catalogue.planner import check
    from gpuplay.core.studies.compare import baseline_spec

    verdict = check(baseline_spec(spec), probe_timeout=30.0)
    if not isinstance(verdict, Refusal):
        return True
    err.print(
        visible(f"no NumPy baseline for {spec.workload}, so no speedup: {verdict}"),
        style="yellow",
        highlight=False,
        markup=False,
    )
    return False


def _needed_backend(spec: Any) -> Any:
    """The backend the parameters need when -b was not given (core.scenarios.on_needed_backend,
    which gpuplay.run shares); said on stderr. An explicit -b stays."""
    from gpuplay.core.catalogue.scenarios import on_needed_backend

    if click.get_current_context().get_parameter_source("backend") != click.core.ParameterSource.DEFAULT:
        return spec
    spec, said = on_needed_backend(spec)
    if said:
        stderr_console().print(said, highlight=False, markup=False)
    return spec


def _code_scenario(arg: str) -> Any:
    """A code file named on the command line (or by its stem, from code_files in config.toml)."""
    from gpuplay.core.catalogue.scenarios import code_scenario

    return code_scenario(arg)


command = run
