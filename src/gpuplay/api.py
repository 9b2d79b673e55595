"""gpuplay from Python: `run`, `compare`, `sweep`, `measure` and `load`.

A thin face over what the CLI uses: the same scenario files, planner (`core.catalogue.planner.check`),
engine process (`core.engine.measure`), NumPy baselines and pairing (`core.compare`), sweep plan
(`core.sweep`) and session log. Nothing here imports torch or CuPy: the engine process does.
docs/python-api.md describes every name.
"""

from __future__ import annotations

import csv
import inspect
import io
import math
import re
import tempfile
import textwrap
import threading
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gpuplay as _package
from gpuplay import progress as _progress
from gpuplay.core.storage import argcheck
from gpuplay.core.storage.safetext import visible
from gpuplay.results import Comparison as Comparison  # re-exported: a name of gpuplay.__all__
from gpuplay.results import Ladder as Ladder  # gpuplay.tune's answer
from gpuplay.results import Result, Results, Sweep, Table

if TYPE_CHECKING:
    from gpuplay.core.catalogue.scenarios import Scenario
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

# The names are listed once, in the package's __init__ (which loads them from here on first use).
__all__ = [n for n in _package.__all__ if n not in ("__version__", "load_ipython_extension")]

PROBE_TIMEOUT_S = 30.0
MAX_LOAD_WARNINGS = 5  # load(): problems with a file said one by one, the rest counted
# The RunSpec fields run() takes as its own arguments; every other spec lever is a keyword.
_OWN = ("backend", "device", "dtype", "budget_s")


class Refused(Exception):
    """The configuration cannot run here; `reason` says why, `hint` what to do instead."""

    def __init__(self, reason: str, hint: str = "", configuration: str = "") -> None:
        self.reason, self.hint, self.configuration = reason, hint, configuration
        text = f"{configuration}: {reason}" if configuration else reason
        super().__init__(f"{text} ({hint})" if hint else text)


class MeasurementError(RuntimeError):
    """The measurement ran and failed (out of memory, an exception in the step, a compile
    error); `result` holds what it recorded."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


# -- measuring -----------------------------------------------------------------------------------
def _check_dirs(scenario_dirs: Sequence[str | Path]) -> None:
    """A scenario folder the caller named must be one (as `--scenarios` on the command line): it
    was a warning, and the scenarios in it were silently missing."""
    if isinstance(scenario_dirs, str | Path):
        raise ValueError("scenario_dirs must be a list of folders: scenario_dirs=['my_scenarios']")
    if not isinstance(scenario_dirs, list | tuple):
        raise TypeError(
            f"scenario_dirs takes a list of folders, e.g. scenario_dirs=['my_scenarios']; "
            f"got {argcheck.shown(scenario_dirs)} ({argcheck.kind_of(scenario_dirs)})"
        )
    for d in scenario_dirs:
        argcheck.expect_path("scenario_dirs", d, "folders")
        folder = Path(d).expanduser()
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise ValueError(visible(f"scenario_dirs: {folder} {what}"))


def _scenario(name: str | Path, scenario_dirs: Sequence[str | Path] = ()) -> Scenario:
    from gpuplay.core.catalogue.scenarios import code_scenario, load_scenarios
    from gpuplay.core.storage.config import load_config
    from gpuplay.core.workloads.usercode import UserCodeError

    argcheck.expect_path("scenario", name, "a scenario's name or a code file's path")
    _check_dirs(scenario_dirs)
    arg = str(name)
    try:
        sc = code_scenario(arg)
    except (UserCodeError, OSError, SyntaxError) as exc:
        raise ValueError(f"code file {arg!r}: {exc}") from None
    if sc is not None:
        return sc
    cfg = load_config()
    sset = load_scenarios([*cfg.scenario_dirs, *scenario_dirs])
    for problem in [
        *cfg.problems,
        *(f"scenario {e.path}: {e.field + ': ' if e.field else ''}{e.detail}" for e in sset.errors),
    ]:
        warnings.warn(visible(problem), stacklevel=3)
    if arg not in sset.scenarios:
        raise ValueError(visible(sset.unknown(arg)))
    return sset.scenarios[arg]


def _check_lever(name: str, value: Any, call: Callable[..., Any] | None = None) -> None:
    """A lever keyword's value of the right kind and within its bounds (the CLI's click types do
    this for flags); RunSpec.validate then checks choices. An unknown name is answered with the
    closest of every keyword `call` takes (its own arguments and the levers): `bakend` → backend."""
    from gpuplay.core.catalogue import levers
    from gpuplay.core.storage import bounds

    lever = levers.BY_NAME.get(name)
    if lever is None or lever.is_param:
        lever_names = [lv.name for lv in levers.spec_levers() if lv.name not in _OWN]
        own = [p for p in inspect.signature(call).parameters if p != "levers"] if call else []
        hint = argcheck.did_you_mean(name, [*own, *lever_names]) or ";"
        where = f"{call.__name__}(): " if call else ""
        raise ValueError(
            f"{where}unknown keyword argument {name!r}{hint} levers: {', '.join(lever_names)}"
            + (f"; arguments: {', '.join(own)}" if own else "")
            + " (workload parameters go in params=)"
        )
    if value is None:  # not given: the spec's default
        return
    if lever.kind is bool:
        ok = isinstance(value, bool)
    elif lever.kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif lever.kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, lever.kind)
    if not ok:
        raise ValueError(f"{name} must be {lever.kind.__name__}; got {value!r}")
    if lever.choices and value not in lever.choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, lever.choices))}; got {value!r}")
    limits = lever.limits() if callable(lever.limits) else lever.limits
    if limits is not None and lever.kind in (int, float):
        try:
            bounds.check_number(name, value, limits, integer=lever.kind is int)
        except bounds.BoundsError as exc:
            raise ValueError(str(exc)) from None


def _expect_preset(preset: Any) -> None:
    if preset is not None:
        argcheck.expect_text("preset", preset, "a preset's name, e.g. 'quick'")


def _expect_sweep_values(param: str, raw: Any) -> None:
    if not isinstance(raw, list | tuple | range | str):
        raise TypeError(
            f"over[{param!r}] takes the values to sweep, e.g. [256, 512, 1024] or '256,512'; "
            f"got {argcheck.shown(raw)} ({argcheck.kind_of(raw)})"
        )


def _spec(
    sc: Scenario,
    preset: str | None,
    params: Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    call: Callable[..., Any] | None = None,
) -> tuple[RunSpec, str]:
    from gpuplay.core.catalogue.scenarios import spec_for

    _expect_preset(preset)
    argcheck.expect_mapping("params", params, "{'n': 2048}")
    for name, value in fields.items():
        _check_lever(name, value, call)
    if "budget_s" in fields and fields["budget_s"] is not None:
        b = fields["budget_s"]
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b):
            raise ValueError(f"budget_s must be a finite number of seconds; got {b!r}")
    try:
        spec, size = spec_for(sc, preset, params, **{k: v for k, v in fields.items() if v is not None})
        return spec, str(size)
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None


def _adopt_probe(gpu: bool, backends: tuple[str, ...]) -> None:
    from gpuplay.core.engine.client import adopt_shared_probe

    # Starts the engine (it imports torch, not us), probing only the backends the call uses.
    adopt_shared_probe(PROBE_TIMEOUT_S, final=gpu, backends=backends)


def _interruptible(work: Callable[[threading.Event], Any], cancel: threading.Event) -> tuple[Any, bool]:
    """Run `work` in a thread so a KeyboardInterrupt (a notebook's interrupt button, Ctrl-C) reaches
    this one: the cancel then stops the engine within one step (or the client replaces it), and
    what finished is kept. Returns (work's value, whether it was interrupted)."""
    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            finished.set()

    t = threading.Thread(target=target, name="gpuplay-measure", daemon=True)
    t.start()
    interrupted = False
    # Waited on an Event, not t.join(): on CPython 3.11 a KeyboardInterrupt inside join() leaves
    # is_alive() False while the thread still runs, so the call returned mid-measurement (run()
    # with no result; compare/sweep with the engine still busy behind them).
    while not finished.is_set():
        try:
            finished.wait(0.1)
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
    if "error" in box:
        raise box["error"]
    return box.get("value"), interrupted


def _log(results: Sequence[RunResult]) -> None:
    """Into this process's session log, as the CLI does (gpuplay history reads it)."""
    from gpuplay.core.reports.sessionlog import SessionLog

    log = _session_log[0] if _session_log else None
    if log is None:
        log = SessionLog()
        _session_log.append(log)
    for r in results:
        if r.usable:
            log.append(r)


_session_log: list[Any] = []


def run(
    scenario: str | Path,
    *,
    backend: str | None = None,  # numpy, or the one the params need
    device: str = "cpu",
    dtype: str | None = None,
    preset: str | None = None,
    params: Mapping[str, Any] | None = None,
    budget_s: float | None = None,
    baseline: bool = True,
    scenario_dirs: Sequence[str | Path] = (),
    **levers: Any,
) -> Result:
    """Time one scenario (or code file) in one configuration, as `gpuplay run` does.

    With `baseline` (the default) a configuration other than NumPy on the CPU is timed in
    interleaved pairs with that baseline, so the Result has a speedup with its 95% interval.
    Raises Refused when the configuration cannot run here, ValueError for an unknown scenario,
    lever or parameter or a bad value (NaN budget_s included), MeasurementError when it failed.
    Interrupting (Ctrl-C, a notebook's stop button) stops it and returns what was timed.
    """
    from gpuplay.core.catalogue.planner import check
    from gpuplay.core.catalogue.scenarios import on_needed_backend
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.spec import Refusal
    from gpuplay.core.studies.compare import attach_baselines, baseline_spec, is_baseline

    argcheck.expect_mapping("params", params, "{'n': 2048}")
    fields = {"backend": backend, "device": device, "dtype": dtype, "budget_s": budget_s, **levers}
    for name, value in levers.items():  # a misspelt keyword before the scenario is even looked up
        _check_lever(name, value, run)
    sc = _scenario(scenario, scenario_dirs)
    spec, size = _spec(sc, preset, params, fields, run)
    if backend is None:  # as `gpuplay run` without -b (runtime=onnxruntime needs torch)
        spec = on_needed_backend(spec)[0]
    _adopt_probe(spec.backend == "cupy" or spec.device != "cpu", ("numpy", spec.backend))
    verdict = check(spec, probe_timeout=PROBE_TIMEOUT_S)
    if isinstance(verdict, Refusal):
        raise Refused(verdict.reason, verdict.hint, spec.label())
    pair = baseline_spec(spec) if baseline and not is_baseline(spec) else None
    telemetry = RunTelemetry()
    base: list[RunResult] = []  # the baseline side of the pairs: the Result's baseline, logged as its row
    r, interrupted = _interruptible(
        lambda cancel: engine_measure(
            spec, cancel=cancel, telemetry=telemetry, paired_with=pair, on_baseline=base.append
        ),
        threading.Event(),
    )
    if not interrupted:
        _log([*base, r])  # as the CLI: the measurement an interrupt stopped is not a finished one
    result = Result(attach_baselines([r], base)[0])
    if interrupted:
        warnings.warn(f"interrupted: {len(r.samples)} step(s) of {spec.label()} were timed", stacklevel=2)
    elif r.status == "refused":
        raise Refused(r.message, "", spec.label())
    elif r.status == "failed":
        raise MeasurementError(visible(f"{spec.label()}: {r.message}"), result)
    return result


def _run_specs(
    specs: Sequence[RunSpec], show_progress: bool, paired: bool = True
) -> tuple[list[RunResult], bool]:
    """Each spec in turn, each non-baseline paired with its baseline (core.compare.run_compare),
    logged as it finishes; an interrupt keeps what finished."""
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.reports.report import fmt_time
    from gpuplay.core.studies.compare import run_compare

    bar = _progress.make(len(specs), show_progress)
    done: list[RunResult] = []

    def on_result(i: int, r: RunResult) -> None:
        if r.status == "cancelled":
            return  # stopped by the interrupt: not a finished measurement
        done.append(r)
        _log([r])
        if bar is not None:
            what = fmt_time(r.median) if r.status == "ok" else f"{r.status}: {r.message}"
            bar.step(f"{r.spec.scenario} {r.spec.label()}: {what}")

    try:
        _, interrupted = _interruptible(
            lambda cancel: run_compare(
                specs,
                cancel=cancel,
                on_result=on_result,
                telemetry=RunTelemetry(),
                measure=engine_measure,
                paired=paired,
            ),  # fmt: skip
            threading.Event(),
        )
    finally:
        if bar is not None:
            bar.close()
    return done, interrupted


_EXAMPLES = {"backends": "'numpy,torch'", "devices": "'cpu,cuda'", "dtypes": "'float32,float64'",
             "variants": "'base,compile'"}  # fmt: skip


def _names(value: str | Sequence[str], what: str, allowed: Sequence[str] | None) -> list[str]:
    """`"numpy,torch"` or `["numpy", "torch"]`, as the CLI's list flags take them (core.spec)."""
    from gpuplay.core.spec import SpecError, pick_names

    name = what.removesuffix("(s)") + "s"
    argcheck.expect_names(name, value, _EXAMPLES.get(name, "'a,b'"))
    try:
        return pick_names(value, allowed)
    except SpecError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _device(name: str) -> str:
    from gpuplay.core.spec import is_device_name

    if not is_device_name(name):
        raise ValueError(f"device must be cpu, cuda, cuda:N, xpu, xpu:N or mps; got {name!r}")
    return {"cuda": "cuda:0", "xpu": "xpu:0"}.get(name, name)


def _compare_scenarios(
    scenarios: Sequence[Scenario],
    *,
    backends: str | Sequence[str],
    devices: str | Sequence[str] | None,
    variants: str | Sequence[str],
    dtype: str,
    preset: str | None,
    budget_s: float | None,
    threads: int | None,
    max_step_s: float | None,
    progress: bool,
    levers: Mapping[str, Any] | None = None,
    paired: bool = True,
    params: Mapping[str, Any] | None = None,
) -> Results:
    from gpuplay.core.reports.report import environment
    from gpuplay.core.spec import BACKENDS
    from gpuplay.core.studies.compare import VARIANTS, plan_compare

    _expect_preset(preset)

    chosen = _names(backends, "backend(s)", BACKENDS)
    vlist = _names(variants, "variant(s)", tuple(VARIANTS))
    kw = {
        k: v
        for k, v in (("budget_s", budget_s), ("threads", threads), ("max_step_s", max_step_s))
        if v is not None
    }
    kw.update(levers or {})  # the cell magic's other `gpuplay run` flags (--warmup, --cache, …)
    fields = {"dtype": dtype, **kw}
    for name, value in fields.items():
        _check_lever(name, value)
    # "cuda" is the first GPU, as everywhere else ('cuda' would match no planned 'cuda:N' row).
    devs = None if devices is None else [_device(d) for d in _names(devices, "device(s)", None)]
    argcheck.expect_mapping("params", params, "{'n': 2048}")
    try:
        for sc in scenarios:
            sc.preset_params(sc.chosen_preset(preset))
            if params:  # run's checks: an unknown name or a bad value, with the known names
                _spec(sc, sc.chosen_preset(preset), params, {"dtype": dtype})
        _adopt_probe("cupy" in chosen or any(d != "cpu" for d in devs or ()), ("numpy", *chosen))
        specs, refused = plan_compare(
            scenarios, preset, chosen, dtype=dtype, variants=vlist, params=params, **kw
        )
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None
    if devs is not None:
        from gpuplay.core.studies.compare import is_baseline

        planned = {s.device for s in specs} | {s.device for s, _ in refused}
        missing = [d for d in devs if d not in planned]
        if missing:  # said, never an empty table: a device named wrongly or not here
            raise ValueError(
                f"device(s) {', '.join(map(repr, missing))}: not here for these backends "
                f"(devices here: {', '.join(sorted(planned))})"
            )
        specs = [s for s in specs if s.device in devs or is_baseline(s)]
        refused = [(s, w) for s, w in refused if s.device in devs]
    if not paired:  # no NumPy baseline the caller did not name, and no interleaved pairs
        specs = [s for s in specs if s.backend in chosen]
    done, interrupted = _run_specs(specs, progress, paired)
    if interrupted:
        warnings.warn(f"interrupted: {len(done)} of {len(specs)} measurements finished", stacklevel=3)
    return Results.from_run_results(
        done,
        refused=[(f"{s.scenario}: {s.label()}", str(w)) for s, w in refused],
        interrupted=interrupted,
        environment=environment(),
    )


@argcheck.keywords_checked
def compare(
    scenario: str | Path | Sequence[str | Path] | None,
    *,
    backends: str | Sequence[str] = ("numpy", "torch", "cupy"),
    devices: str | Sequence[str] | None = None,
    variants: str | Sequence[str] = ("base",),
    dtype: str = "float32",
    preset: str | None = None,
    params: Mapping[str, Any] | None = None,
    budget_s: float | None = None,
    threads: int | None = None,
    max_step_s: float | None = None,
    scenario_dirs: Sequence[str | Path] = (),
    progress: bool = True,
) -> Results:
    """A scenario (a list of them, or None for all) on each backend and device that can run it,
    each paired with NumPy on the CPU, as `gpuplay compare` does. Configurations that cannot run
    here are in `Results.refused` with the reason. An interrupt keeps what finished. `params` are
    set over every scenario's preset, checked as `run` checks them (ValueError naming the known
    ones, for the first scenario that lacks one)."""
    if scenario is None:
        from gpuplay.core.catalogue.scenarios import load_scenarios
        from gpuplay.core.storage.config import load_config

        _check_dirs(scenario_dirs)
        scs = list(load_scenarios([*load_config().scenario_dirs, *scenario_dirs]).scenarios.values())
    elif isinstance(scenario, str | Path):
        scs = [_scenario(scenario, scenario_dirs)]
    elif not isinstance(scenario, list | tuple):
        raise TypeError(
            "scenario takes a scenario's name, a code file's path, a list of them, or None for all; "
            f"got {argcheck.shown(scenario)} ({argcheck.kind_of(scenario)})"
        )
    else:
        scs = [_scenario(s, scenario_dirs) for s in scenario]
    return _compare_scenarios(scs, backends=backends, devices=devices, variants=variants, dtype=dtype,
                              preset=preset, budget_s=budget_s, threads=threads, max_step_s=max_step_s,
                              progress=progress, params=params)  # fmt: skip


@argcheck.keywords_checked
def sweep(
    scenario: str | Path,
    over: Mapping[str, Sequence[float] | str],
    *,
    backends: str | Sequence[str] = ("numpy", "torch"),
    devices: str | Sequence[str] = ("cpu",),
    dtypes: str | Sequence[str] = ("float32",),
    variants: str | Sequence[str] = ("base",),
    transfers: str = "off",
    preset: str | None = None,
    budget_s: float = 0.5,
    warmup: int = 3,
    threads: int | None = None,
    max_step_s: float = 10.0,
    scenario_dirs: Sequence[str | Path] = (),
    progress: bool = True,
) -> Sweep:
    """Each configuration at each value of one parameter, smallest first, as `gpuplay sweep`:
    `over={"n": [256, 512, 1024]}` or `over={"n": "256..4096"}`. An interrupt keeps what finished."""
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.reports.report import environment, fmt_time
    from gpuplay.core.spec import BACKENDS, DTYPES
    from gpuplay.core.studies.sweep import VARIANTS, SweepError, plan_sweep, run_sweep, sweep_values

    argcheck.expect_mapping("over", over, "{'n': [256, 512, 1024]}")
    if not isinstance(over, Mapping) or len(over) != 1:
        raise ValueError("over must name one parameter: over={'n': [256, 512, 1024]}")
    ((param, raw),) = over.items()
    _expect_sweep_values(param, raw)
    sc = _scenario(scenario, scenario_dirs)
    chosen = _names(backends, "backend(s)", BACKENDS)
    devs = _names(devices, "device(s)", None)
    dts = _names(dtypes, "dtype(s)", DTYPES)
    vs = _names(variants, "variant(s)", tuple(VARIANTS))
    for name, value in (
        ("budget_s", budget_s),
        ("warmup", warmup),
        ("threads", threads),
        ("max_step_s", max_step_s),
    ):
        _check_lever(name, value)
    try:
        text = raw if isinstance(raw, str) else ",".join(str(v) for v in raw)
        values = sweep_values(sc, str(param), text)
        _adopt_probe("cupy" in chosen or any(d != "cpu" for d in devs), ("numpy", *chosen))
        plan = plan_sweep(sc, str(param), values, chosen, devs, preset=preset, dtypes=dts, variants=vs,
                          transfers=transfers, budget_s=budget_s, warmup=warmup, threads=threads,
                          max_step_s=max_step_s)  # fmt: skip
    except SweepError as exc:
        raise ValueError(f"over: {exc}") from None
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None
    bar = _progress.make(plan.total, progress)

    def on_point(series: Any, point: Any) -> None:
        if point.result is not None:
            _log([point.result])
        if bar is not None:
            what = fmt_time(point.median) if point.median else f"{point.status}: {point.message}"
            bar.step(f"{series.label} {param}={point.value}: {what}")

    try:
        _, interrupted = _interruptible(
            lambda cancel: run_sweep(
                plan, engine_measure, cancel=cancel, on_point=on_point, telemetry=RunTelemetry()
            ),
            threading.Event(),
        )
    finally:
        if bar is not None:
            bar.close()
    plan.interrupted = plan.interrupted or interrupted
    if interrupted:
        warnings.warn("interrupted: the sweep keeps the points that finished", stacklevel=2)
    return Sweep(plan.to_dict(), environment())


# The notebook functions' files: kept until the kernel exits (the engine reads them by path).
_code_dir: list[tempfile.TemporaryDirectory[str]] = []


def _module_imports(*functions: Callable[..., Any]) -> list[str]:
    """`import numpy as np` for each module a function names from its globals, so its source
    runs in the engine's file as it ran in the notebook."""
    lines = []
    for f in functions:
        for name in f.__code__.co_names:
            value = f.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                line = f"import {value.__name__}" + ("" if value.__name__ == name else f" as {name}")
                if line not in lines:
                    lines.append(line)
    return lines


def code_file(
    step: Callable[..., Any],
    inputs: Callable[..., Any],
    params: Mapping[str, Any] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    name: str | None = None,
) -> Path:
    """A code file (docs/your-code.md) from two functions' source: their text, the modules they
    name, PARAMS and PRESETS. Closures and other globals do not travel: only source does."""
    try:
        # Each def renamed to what the protocol names (the file is read without running it, so
        # `step = saxpy` would not be seen).
        sources = [
            re.sub(
                rf"^def\s+{re.escape(f.__name__)}\s*\(",
                f"def {role}(",
                textwrap.dedent(inspect.getsource(f)),
                count=1,
                flags=re.M,
            )  # fmt: skip
            for f, role in ((inputs, "inputs"), (step, "step"))
        ]
    except (OSError, TypeError) as exc:
        raise ValueError(
            f"cannot read the functions' source ({exc}); define them with def in a cell or file"
        ) from None
    for f in (inputs, step):
        if f.__code__.co_freevars:
            raise ValueError(
                f"{f.__name__} uses variables of an enclosing function ({', '.join(f.__code__.co_freevars)}); define it at the top level"
            )
    stem = name or step.__name__
    if not stem.isidentifier():
        raise ValueError(f"name must be an identifier; got {stem!r}")
    doc = (inspect.getdoc(step) or f"{stem}: a function measured from Python").replace('"""', "'''")
    text = "\n".join([
        f'"""{doc}"""', *_module_imports(inputs, step),
        f"PARAMS = {dict(params or {})!r}", f"PRESETS = {dict(presets or {})!r}", "", *sources,
        "",
    ])  # fmt: skip
    if not _code_dir:
        _code_dir.append(tempfile.TemporaryDirectory(prefix="gpuplay-measure-"))
    path = Path(_code_dir[0].name) / f"{stem}.py"
    path.write_text(text, encoding="utf-8")
    return path


@argcheck.keywords_checked
def measure(
    step: Callable[..., Any],
    inputs: Callable[..., Any],
    *,
    params: Mapping[str, Any] | None = None,
    backends: str | Sequence[str] = ("numpy", "torch"),
    devices: str | Sequence[str] | None = None,
    dtype: str = "float32",
    budget_s: float | None = None,
    name: str | None = None,
    progress: bool = True,
) -> Results:
    """Time a function defined in the notebook on each backend, each paired with NumPy on the CPU:
    `inputs(rng, **params)` returns NumPy arrays, `step(xp, *arrays)` is the timed work on the
    backend's array namespace (docs/your-code.md). Their source is written to a code file the
    engine process runs, so they must be self-contained: modules they use are imported there too,
    other globals are not."""
    argcheck.expect_callable("step", step, "step(xp, *arrays): the timed work")
    argcheck.expect_callable("inputs", inputs, "inputs(rng, **params): the NumPy arrays")
    for what, f in (("step", step), ("inputs", inputs)):
        if getattr(f, "__name__", "") == "<lambda>":
            raise TypeError(
                f"{what} must be a function defined with def, not a lambda: its source is written "
                f"to a code file the engine process runs (def {what}(…): …)"
            )
    argcheck.expect_mapping("params", params, "{'n': 2048}")
    if name is not None:
        argcheck.expect_text("name", name, "the code file's name, an identifier")
    path = code_file(step, inputs, params, name=name)
    sc = _scenario(path)
    return _compare_scenarios([sc], backends=backends, devices=devices, variants=("base",), dtype=dtype,
                              preset=None, budget_s=budget_s, threads=None, max_step_s=None,
                              progress=progress)  # fmt: skip


# -- reading files back --------------------------------------------------------------------------
MAX_SAMPLE_S = 86_400.0  # a step time past a day is no measurement (and 1e308 overflows a sum)


def _record(d: Any) -> dict[str, Any] | None:
    """The measurement record in `d`: a RunResult's dict (`spec` beside it), or the full record a
    Result.to_dict() keeps under `result`; None when `d` is neither."""
    if not isinstance(d, dict):
        return None
    if isinstance(d.get("spec"), dict):
        return d
    inner = d.get("result")
    return inner if isinstance(inner, dict) and isinstance(inner.get("spec"), dict) else None


def _bad_field(d: Mapping[str, Any]) -> str:
    """Why a record's figures cannot be trusted ('' when they can): step times that are not a list
    of finite seconds (NaN, Infinity, 1e308, a string), conditions that are not a table."""
    for key in ("samples_s", "warmup_s"):
        xs = d.get(key)
        if xs is None:
            continue
        if not isinstance(xs, list):
            return f"{key} is {argcheck.kind_of(xs)}, not a list of seconds"
        for x in xs:
            if isinstance(x, bool) or not isinstance(x, int | float):
                return f"{key} holds {argcheck.shown(x, 30)}, not a number of seconds"
            if not math.isfinite(x) or not 0 <= x <= MAX_SAMPLE_S:
                return f"{key} holds {x!r}, not a finite step time under a day"
    for key, kind in (("conditions", dict), ("notes", list), ("spec", dict)):
        if key in d and d[key] is not None and not isinstance(d[key], kind):
            return f"{key} is {argcheck.kind_of(d[key])}, not a {'table' if kind is dict else 'list'}"
    return ""


def _results_from(dicts: Sequence[Any], p: Path, problems: list[str]) -> list[RunResult]:
    from gpuplay.core.result import RunResult

    out = []
    for i, item in enumerate(dicts, 1):
        d = _record(item)
        if d is None:
            continue
        bad = _bad_field(d)
        if bad:
            problems.append(f"{p}: result {i} skipped: {bad}")
            continue
        summary = d.get("summary")
        median = summary.get("median") if isinstance(summary, dict) else None
        if median is not None and not (isinstance(median, int | float) and math.isfinite(median)):
            problems.append(f"{p}: result {i}: summary.median is {median!r}; recomputed from samples_s")
        try:
            out.append(RunResult.from_dict(d))
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            problems.append(f"{p}: result {i} skipped ({exc})")
    return out


def _no_results(p: Path, problems: Sequence[str]) -> ValueError:
    if problems:  # every record refused: the first reasons, not "not gpuplay measurements"
        shown = "; ".join(x.removeprefix(f"{p}: ") for x in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return ValueError(visible(f"{p}: no result could be read: {shown}{more}"))
    return ValueError(visible(f"{p}: its results are not gpuplay measurements (no 'spec')"))


def _refused_of(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Results.to_dict()'s `refused`: [{configuration, reason}], kept as (configuration, reason)."""
    items = doc.get("refused")
    if not isinstance(items, list):
        return []
    return [
        (str(x.get("configuration", "")), str(x.get("reason", "")))
        for x in items
        if isinstance(x, dict) and ("configuration" in x or "reason" in x)
    ]


def _load_json(p: Path, problems: list[str]) -> Results | Sweep | Table:
    from gpuplay.core.storage.safeload import read_json_file

    doc = read_json_file(p)  # ValueError naming the file, as load() promises
    if not isinstance(doc, dict):
        doc = {}
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    if isinstance(doc.get("sweep"), dict):
        return Sweep(doc["sweep"], env)
    if doc.get("kind") == "gpuplay-collectives" and isinstance(doc.get("results"), list):
        return Table([r for r in doc["results"] if isinstance(r, dict)], source=p.name)
    if isinstance(doc.get("sources"), list) and isinstance(doc.get("rows"), list):  # compare --from's merge
        return Table([r for r in doc["rows"] if isinstance(r, dict)], source=p.name)
    if isinstance(doc.get("results"), list):
        results = _results_from(doc["results"], p, problems)
        if not results and doc["results"]:
            raise _no_results(p, problems)
        return Results.from_run_results(
            results,
            environment=env,
            source=p.name,
            refused=_refused_of(doc),
            interrupted=doc.get("interrupted") is True,
        )
    if _record(doc) is not None:  # one Result.to_dict() (or a RunResult's dict) written as JSON
        results = _results_from([doc], p, problems)
        if not results:
            raise _no_results(p, problems)
        return Results.from_run_results(results, environment=env, source=p.name)
    raise ValueError(
        f"{p}: not a gpuplay result file; write one with gpuplay run/compare/sweep --format json"
    )


@argcheck.keywords_checked
def load(path: str | Path) -> Results | Sweep | Table:
    """A file gpuplay wrote, read back: a session log (.jsonl) or a run/compare/playground export
    (JSON) → Results; a sweep's JSON → Sweep; any CSV gpuplay writes, a collectives JSON or a
    `compare --from` merge → Table (its rows). A file that is not one of these raises ValueError."""
    from gpuplay.core.reports.sessionlog import read_log
    from gpuplay.core.storage.safeload import FileReadError, read_text_file

    argcheck.expect_path("path", path, "a file gpuplay wrote (.json, .jsonl, .csv)")
    p = Path(path).expanduser()
    problems: list[str] = []
    if p.suffix == ".jsonl":
        if not p.is_file():  # read_log skips what it cannot read; a FIFO is never opened
            from gpuplay.core.storage.safeload import not_regular

            raise ValueError(visible(f"{p}: " + (not_regular(p) if p.exists() else "no such file")))
        results = _results_from(list(read_log(p, problems)), p, problems)
        out: Results | Sweep | Table = Results.from_run_results(results, source=p.name)
    elif p.suffix == ".csv":
        try:
            text = read_text_file(p)
        except FileReadError as exc:
            raise ValueError(str(exc)) from None
        out = Table(list(csv.DictReader(io.StringIO(text))), source=p.name)
    elif p.suffix in (".md", ".markdown"):
        raise ValueError(f"{p}: Markdown is for reading; load the same results' --format json file")
    else:
        out = _load_json(p, problems)
    # A few problems said one by one, the rest counted: a damaged log of 100,000 lines must not
    # flood a notebook's output with 100,000 warnings.
    for problem in problems[:MAX_LOAD_WARNINGS]:
        warnings.warn(visible(problem), stacklevel=2)
    if len(problems) > MAX_LOAD_WARNINGS:
        warnings.warn(
            visible(f"{p}: {len(problems) - MAX_LOAD_WARNINGS} more problem(s) like these"), stacklevel=2
        )
    return out


def tune(
    target: str | Path,
    *,
    device: str | None = None,
    preset: str | None = None,
    params: Mapping[str, Any] | None = None,
    budget_s: float = 120.0,
    scenario_dirs: Sequence[str | Path] = (),
) -> Ladder:
    """Climb the levers checklist on a scenario or code file, as `gpuplay tune` does: each rung
    one change on top of the best configuration so far, timed in interleaved pairs against it,
    kept only when its speedup's 95% interval lies above 1 and it passes the float64 check.

    `device`: where to climb to (default: the best device here); `budget_s`: seconds for the whole
    ladder, compile time included. Raises ValueError for an unknown target, parameter or device,
    or a budget out of bounds. Interrupting keeps the finished rungs (the Ladder says so).
    """
    from gpuplay.core.catalogue.planner import device_refusal
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.spec import SpecError
    from gpuplay.core.studies import tune as ladder_mod

    _expect_preset(preset)
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) or not math.isfinite(budget_s):
        raise ValueError(f"budget_s must be a finite number of seconds; got {budget_s!r}")
    if not ladder_mod.MIN_BUDGET_S <= budget_s <= ladder_mod.MAX_BUDGET_S:
        raise ValueError(
            f"budget_s must be {ladder_mod.MIN_BUDGET_S:g}–{ladder_mod.MAX_BUDGET_S:g} s; got {budget_s!r}"
        )
    if device is not None and not isinstance(device, str):
        raise ValueError(f"device must be a string such as 'cpu' or 'cuda:0'; got {device!r}")
    sc = _scenario(target, scenario_dirs)
    spec, _size = _spec(sc, preset, params, {})
    _adopt_probe(device not in ("cpu",), ("numpy", "torch"))
    where = device or ladder_mod.best_device(PROBE_TIMEOUT_S)
    refusal = device_refusal("torch", where, PROBE_TIMEOUT_S)
    if refusal is not None:
        raise ValueError(visible(f"device {where}: {refusal}"))
    try:
        ladder = ladder_mod.plan_ladder(spec, where, sc.name, float(budget_s), PROBE_TIMEOUT_S)
    except (KeyError, SpecError) as exc:
        raise ValueError(str(exc)) from None

    def on_rung(i: int, rung: Any) -> None:
        if rung.result is not None and rung.result.status != "cancelled":
            _log([rung.result])

    _, interrupted = _interruptible(
        lambda cancel: ladder_mod.run_ladder(
            ladder, engine_measure, cancel=cancel, on_rung=on_rung, profile=ladder_mod.engine_profile
        ),
        threading.Event(),
    )
    if ladder.total is not None and ladder.total.result is not None:
        _log([ladder.total.result])
    if interrupted:
        ladder.interrupted = True
        warnings.warn("interrupted: the finished rungs are kept", stacklevel=2)
    return Ladder(ladder)
