"""The `gpuplay` command: the playground with no arguments, headless subcommands otherwise.

Imports stay inside the commands: `gpuplay --help` loads neither Textual nor
torch, and each subcommand loads only what it uses.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

import click

from gpuplay import __version__
from gpuplay.core.spec import AMP_MODES, BACKENDS, COMPILE_MODES, DTYPES, SpecError

FORMATS_RUN = ("table", "json", "csv")
FORMATS_COMPARE = ("table", "markdown", "json", "csv")


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _load_scenarios(extra: tuple[str, ...]) -> Any:
    from gpuplay.core.config import load_config
    from gpuplay.core.scenarios import load_scenarios

    cfg = load_config()
    err = _stderr_console()
    for problem in cfg.problems:
        err.print(f"[yellow]warning:[/] {problem}", highlight=False)
    sset = load_scenarios([*cfg.scenario_dirs, *extra])
    for e in sset.errors:
        err.print(
            f"[yellow]warning:[/] scenario {e.path}: {e.field + ': ' if e.field else ''}{e.detail}",
            highlight=False,
        )
    return sset


def _message(exc: BaseException) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _parse_sizes(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--size")
        out[key.strip()] = value.strip()
    return out


def _emit(text: str, out: str | None) -> None:
    if out:
        from gpuplay.core.sessionlog import write_atomic

        try:
            write_atomic(Path(out), text)
        except OSError as exc:
            raise click.ClickException(f"cannot write {out}: {exc.strerror or exc}") from None
        _stderr_console().print(f"wrote {out}", highlight=False)
    else:
        click.echo(text, nl=not text.endswith("\n"))


scenario_dirs_option = click.option(
    "--scenarios",
    "scenario_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra folder of scenario .toml files (repeatable; also `scenario_dirs` in config.toml).",
)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gpuplay")
@scenario_dirs_option
@click.pass_context
def main(ctx: click.Context, scenario_dirs: tuple[str, ...]) -> None:
    """An interactive GPU playground for numerical Python.

    With no command, opens the live playground (a terminal UI).
    """
    if ctx.invoked_subcommand is None:
        from gpuplay.tui.app import run_app

        run_app(scenario_dirs=[Path(d) for d in scenario_dirs])


@main.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--probe-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for a slow backend probe (CuPy's can take >10 s).",
)
def info(fmt: str, probe_timeout: float) -> None:
    """Versions, devices, drivers, and what is unavailable and why."""
    from gpuplay.core.info import gather

    data = gather(probe_timeout)
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console()
    env = data["environment"]
    con.print(
        f"[bold]gpuplay {env['gpuplay']}[/]  Python {env['python']}  {env['platform']}", highlight=False
    )
    con.print(f"CPU: {env['cpu']} ({env['cores']} cores usable)", highlight=False)
    t = Table("backend", "version", "status", "devices", header_style="bold")
    for b in data["backends"]:
        status = "[green]available[/]" if b["available"] else f"[red]unavailable[/]: {escape(b['reason'])}"
        if b["name"] == "torch" and b["available"]:
            status += f"\nCUDA: {b['cuda']}" + (
                f" (built for CUDA {b['cuda_version']})" if b.get("cuda_version") else ""
            )
            status += f"\nthreads: {b.get('threads')}"
        if b["name"] == "numpy":
            status += f"\nBLAS threads: {b.get('blas_threads')}"
        devs = "\n".join(f"{d['id']}: {d['name']}" for d in b["devices"]) or "—"
        t.add_row(b["title"], b["version"] or "—", status, devs)
    con.print(t)
    nv = data["nvml"]
    if nv["status"] == "ok":
        con.print(f"NVML: driver {nv['driver']}, {len(nv['gpus'])} GPU(s)", highlight=False)
        for g in nv["gpus"]:
            mem = (
                f"{g['mem_used'] / 2**30:.1f}/{g['mem_total'] / 2**30:.1f} GiB"
                if g.get("mem_total")
                else "n/a"
            )
            con.print(
                f"  GPU {g['index']}: {g['name']}  util {g['util_gpu']}%  mem {mem}  "
                f"{g['power_w']} W  {g['temp_c']} °C  {g['pstate']}",
                highlight=False,
            )
    else:
        con.print(f"NVML: {nv['status']}", highlight=False, markup=False)
    con.print(f"config: {data['paths']['config']}\nstate:  {data['paths']['state']}", highlight=False)
    for p in data["config_problems"]:
        con.print(f"[yellow]warning:[/] {p}", highlight=False)


@main.command(name="list")
@scenario_dirs_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def list_(scenario_dirs: tuple[str, ...], fmt: str) -> None:
    """Scenarios, their presets and the public claims they check."""
    sset = _load_scenarios(scenario_dirs)
    if fmt == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "name": s.name,
                        "title": s.title,
                        "workload": s.workload,
                        "description": s.description,
                        "presets": {k: s.preset_params(k) for k in s.presets},
                        "params": s.preset_params(None),
                        "claim": s.claim.text if s.claim else None,
                        "path": str(s.path),
                    }
                    for s in sset.scenarios.values()
                ],
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    t = Table("scenario", "workload", "presets", "claim", header_style="bold")
    for s in sset.scenarios.values():
        presets = "\n".join(
            f"{k}: " + ", ".join(f"{a}={b}" for a, b in s.presets[k].items()) for k in s.presets
        )
        t.add_row(f"[bold]{s.name}[/]\n{s.title}", s.workload, presets, s.claim.text if s.claim else "—")
    Console().print(t)


def _spec_options(f: Any) -> Any:
    options = [
        click.option("--backend", "-b", type=click.Choice(BACKENDS), default="numpy", show_default=True),
        click.option("--device", "-d", default="cpu", show_default=True, help="cpu, cuda, cuda:N or mps."),
        click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True),
        click.option(
            "--amp",
            type=click.Choice(AMP_MODES),
            default="off",
            show_default=True,
            help="torch.autocast precision.",
        ),
        click.option(
            "--compile",
            "compile_mode",
            type=click.Choice(COMPILE_MODES),
            default="off",
            show_default=True,
            help="torch.compile mode (compile time is reported apart).",
        ),
        click.option("--tf32/--no-tf32", default=False, help="Allow TF32 tensor-core matmuls (torch, CUDA)."),
        click.option(
            "--graphs/--no-graphs", default=False, help="Replay each step as a CUDA graph (torch, CUDA)."
        ),
        click.option(
            "--linalg",
            type=click.Choice(["default", "cusolver", "magma"]),
            default="default",
            help="Preferred torch CUDA linear-algebra library.",
        ),
        click.option(
            "--transfers/--no-transfers",
            default=False,
            help="Time host→device input copies and the result's copy back inside each step.",
        ),
        click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True),
        click.option(
            "--repeat",
            type=click.IntRange(min=1),
            default=None,
            help="Timed steps (default: as many as fit in --budget, at least 5).",
        ),
        click.option(
            "--budget",
            type=click.FloatRange(min=0.001),
            default=1.0,
            show_default=True,
            help="Seconds of timed steps when --repeat is not given.",
        ),
        click.option(
            "--threads",
            type=click.IntRange(min=1),
            default=None,
            help="CPU threads for torch and NumPy's BLAS (default: the libraries' own).",
        ),
        click.option(
            "--max-step",
            type=click.FloatRange(min=0.001),
            default=30.0,
            show_default=True,
            help="Refuse a configuration whose single step is estimated longer (seconds).",
        ),
        click.option("--seed", type=int, default=0, show_default=True),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _spec_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    return {
        "backend": kw["backend"],
        "device": kw["device"],
        "dtype": kw["dtype"],
        "amp": kw["amp"],
        "compile": kw["compile_mode"],
        "tf32": kw["tf32"],
        "cuda_graphs": kw["graphs"],
        "linalg_library": kw["linalg"],
        "transfers": kw["transfers"],
        "warmup": kw["warmup"],
        "repeat": kw["repeat"],
        "budget_s": kw["budget"],
        "threads": kw["threads"],
        "max_step_s": kw["max_step"],
        "seed": kw["seed"],
    }


@main.command()
@click.argument("scenario")
@_spec_options
@click.option("--preset", "-p", default=None, help="quick, published, or a preset the scenario defines.")
@click.option(
    "--size", "-s", "sizes", multiple=True, metavar="NAME=VALUE", help="Set a parameter, e.g. -s n=2048."
)
@click.option(
    "--baseline/--no-baseline", default=False, help="Also run NumPy on the CPU and show the speedup."
)
@click.option("--format", "fmt", type=click.Choice(FORMATS_RUN), default="table", show_default=True)
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

    sset = _load_scenarios(scenario_dirs)
    try:
        sc = sset.get(scenario)
        params = {**sc.preset_params(preset), **_parse_sizes(sizes)}
        params = get_workload(sc.workload).resolve(params)
        spec = RunSpec.make(sc.workload, params, scenario=sc.name, **_spec_kwargs(kw))
    except (KeyError, ValueError, SpecError) as exc:
        raise click.UsageError(_message(exc)) from None
    err = _stderr_console()
    specs = [spec]
    if baseline and not is_baseline(spec):
        specs.insert(0, baseline_spec(spec))
    from gpuplay.core.telemetry import RunTelemetry

    results = []
    cancel = threading.Event()
    telemetry = RunTelemetry()
    try:
        for s in specs:
            with err.status(f"running {s.label()} …"):
                results.append(run_spec(s, cancel=cancel, telemetry=telemetry))
    except KeyboardInterrupt:
        cancel.set()
        raise click.Abort() from None
    _log_results(results)
    rows = attach_baselines(results)
    _print_rows(rows, fmt, out, title=f"{sc.title} ({results[-1].size})")
    failed = [r for r in results if r.status in ("failed", "refused")]
    for r in failed:
        err.print(f"{r.status}: {r.spec.label()}: {r.message}", style="red", highlight=False, markup=False)
    if failed:
        sys.exit(1)


def _print_rows(rows: Any, fmt: str, out: str | None, title: str = "", **meta: Any) -> None:
    from gpuplay.core import report

    if fmt == "json":
        _emit(report.to_json(rows, **meta), out)
    elif fmt == "csv":
        _emit(report.to_csv(rows), out)
    elif fmt == "markdown":
        _emit(report.to_markdown(rows, title), out)
    else:
        if out:
            _emit(report.to_markdown(rows, title), out)
            return
        from rich.console import Console

        con = Console()
        shown = [r for r in rows if r.result.summary is not None]
        if shown:
            con.print(report.rich_table(shown, title))
            env = report.environment()
            con.print(
                f"{env['cpu']} ({env['cores']} cores) · medians after warm-up, ± = half the IQR · "
                "CPU: perf_counter_ns, GPU: CUDA events · compile time excluded · error vs float64 NumPy",
                style="dim",
                highlight=False,
                markup=False,
            )
            for line in report.footnotes(shown):
                con.print(line, style="dim", highlight=False, markup=False)


def _log_results(results: Any) -> None:
    from gpuplay.core.sessionlog import SessionLog

    log = SessionLog()
    for r in results:
        if r.usable:
            log.append(r)
    if log.error:
        _stderr_console().print(f"[yellow]warning:[/] {log.error}", highlight=False)


@main.command()
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
@click.option("--format", "fmt", type=click.Choice(FORMATS_COMPARE), default="table", show_default=True)
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
    sset = _load_scenarios(scenario_dirs)
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
        raise click.UsageError(_message(exc)) from None
    err = _stderr_console()
    seen = set()
    for spec, why in refused:
        if (spec.backend, spec.device, str(why)) in seen:
            continue  # one line per reason: "CuPy is not installed" once, not per scenario
        seen.add((spec.backend, spec.device, str(why)))
        err.print(
            f"skipped {spec.label()} ({spec.scenario}): {why}", style="dim", highlight=False, markup=False
        )

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    cancel = threading.Event()
    results = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task("compare", total=len(specs))

        def on_start(i: int, spec: Any) -> None:
            progress.update(task, description=f"{spec.scenario}: {spec.label()}")

        def on_result(i: int, r: Any) -> None:
            progress.advance(task)
            if r.status in ("failed", "refused"):
                progress.console.print(
                    f"{r.status}: {r.spec.scenario} {r.spec.label()}: {r.message}",
                    style="yellow",
                    highlight=False,
                    markup=False,
                )

        try:
            from gpuplay.core.telemetry import RunTelemetry

            results = run_compare(
                specs, cancel=cancel, on_start=on_start, on_result=on_result, telemetry=RunTelemetry()
            )
        except KeyboardInterrupt:
            cancel.set()
            err.print("interrupted: showing what finished", highlight=False)
    _log_results(results)
    rows = attach_baselines(results)
    _print_rows(
        rows,
        fmt,
        out,
        title=f"gpuplay compare --preset {preset}",
        preset=preset,
        refused=[{"label": s.label(), "scenario": s.scenario, "reason": str(w)} for s, w in refused],
    )


@main.command()
@click.option("--interval", type=click.FloatRange(min=0.05), default=0.5, show_default=True, help="Seconds.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="json",
    show_default=True,
    help="json: one JSON object per line; table: one line of text per sample.",
)
@click.option("--count", type=click.IntRange(min=1), default=None, help="Stop after N samples.")
def monitor(interval: float, fmt: str, count: int | None) -> None:
    """Stream GPU and host telemetry (JSON lines for scripts). Ctrl+C stops."""
    import time

    import psutil

    from gpuplay.core.telemetry import nvml_status, snapshot

    status = nvml_status()
    if status:
        _stderr_console().print(
            f"{status}: host telemetry only", style="yellow", highlight=False, markup=False
        )
    psutil.cpu_percent(percpu=True)  # psutil's first reading covers no interval: prime it
    time.sleep(min(interval, 0.1))
    n = 0
    try:
        while count is None or n < count:
            t0 = time.monotonic()
            snap = snapshot()
            if fmt == "json":
                click.echo(json.dumps(snap.to_dict()))
            else:
                h = snap.host
                gpus = "  ".join(
                    f"GPU{g.index} {_na(g.util_gpu, '%')} {_na(g.power_w, ' W')} "
                    f"{_na(g.mem_used and g.mem_used / 2**30, ' GiB', 1)}"
                    for g in snap.gpus
                )
                click.echo(
                    f"{time.strftime('%H:%M:%S')}  CPU {h.cpu_mean:5.1f}%  "
                    f"mem {h.mem_used / 2**30:.1f}/{h.mem_total / 2**30:.1f} GiB  "
                    f"rss {h.process_rss / 2**20:.0f} MiB  {gpus}"
                )
            sys.stdout.flush()
            n += 1
            if count is None or n < count:
                time.sleep(max(0.0, interval - (time.monotonic() - t0)))
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        sys.stderr.close()


def _na(v: Any, unit: str, digits: int = 0) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}{unit}"


@main.command()
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Newest N measurements."
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True
)
def history(limit: int, fmt: str) -> None:
    """Measurements from past sessions (the session logs in the state folder)."""
    from gpuplay.core.compare import attach_baselines
    from gpuplay.core.result import RunResult
    from gpuplay.core.sessionlog import list_sessions, read_log, sessions_dir

    results = []
    for path in list_sessions():
        for d in read_log(path):
            try:
                r = RunResult.from_dict(d)
            except (KeyError, TypeError, ValueError, SpecError):
                continue
            r.conditions.setdefault("session", path.name)
            results.append(r)
    if not results:
        _stderr_console().print(f"no measurements yet in {sessions_dir()}", highlight=False)
        return
    _print_rows(attach_baselines(results[-limit:]), fmt, None, title=f"history (newest {limit})")
