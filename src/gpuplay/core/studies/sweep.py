"""A crossover sweep: each configuration timed at each size of one parameter, smallest first.

Every point is a normal measurement (the engine's honest runner: warm-up, median with an
interval, the float64 check); the sweep only decides the order, stops a configuration once a
size is refused (max step, memory), fits each series and finds where series cross.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.planner import check
from gpuplay.core.catalogue.scenarios import Scenario
from gpuplay.core.measure.stats import Summary
from gpuplay.core.measure.sweepfit import Fit, crossing, fit_floor_rate, predicted_crossing
from gpuplay.core.result import RunResult
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import ITEMSIZE, Param

MAX_POINTS = 64  # a sweep is minutes, not hours: more sizes than this is a typo
TRANSFER_MODES = ("off", "on", "both")
# Levers a sweep can put on top of each torch configuration (as `gpuplay compare --variants`).
VARIANTS: dict[str, dict[str, object]] = levers.variants()  # generated from core/catalogue/levers.py


class SweepError(ValueError):
    """Bad sweep input, said in words (the CLI exits 2 with it)."""


# -- the sizes ------------------------------------------------------------------------------
_RANGE = re.compile(r"^\s*(.+?)\s*\.\.\s*([^:]+?)\s*(?::\s*(.*?))?\s*$")


def parse_over(text: str) -> tuple[str, str]:
    """'n=32..512' -> ('n', '32..512')."""
    name, sep, values = text.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise SweepError(f"expected PARAM=V1,V2,… or PARAM=LO..HI, got {text!r}")
    return name.strip(), values.strip()


def _number(text: str, what: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise SweepError(f"{what} must be a number; got {text!r}") from None
    if not math.isfinite(x):
        raise SweepError(f"{what} must be finite; got {text!r}")
    return x


def parse_values(text: str, integer: bool = True) -> list[Any]:
    """Sizes from 'V1,V2,…', 'LO..HI' (doubling from LO, HI included) or 'LO..HI:K' (K sizes,
    geometric). Sorted, duplicates dropped; integers where the parameter is one."""
    m = _RANGE.match(text)
    if m:
        raw = _range_values(text, m.group(1), m.group(2), m.group(3))
    else:
        raw = [_number(v.strip(), "each size") for v in text.split(",") if v.strip()]
        if not raw:
            raise SweepError(f"no sizes in {text!r}")
    values: list[Any] = sorted({int(round(x)) for x in raw} if integer else {float(x) for x in raw})
    if len(values) > MAX_POINTS:
        raise SweepError(f"{len(values)} sizes; at most {MAX_POINTS}")
    return values


def _range_values(text: str, start: str, end: str, steps: str | None) -> list[float]:
    """'LO..HI' doubles from LO (HI included); 'LO..HI:K' is K geometric steps."""
    lo, hi = _number(start, "range start"), _number(end, "range end")
    if lo <= 0 or hi <= 0:
        raise SweepError(f"a geometric range needs positive ends; got {text!r}")
    if hi == lo:  # '64..64': one point, as a user narrowing a sweep to one size means it
        return [lo]
    if hi < lo:
        raise SweepError(f"range end must not be below its start; got {text!r}")
    if steps is not None:
        return _geometric_steps(lo, hi, steps)
    count = math.floor(math.log2(hi / lo) + 1e-9) + 1
    if count > MAX_POINTS:
        raise SweepError(f"{text!r} doubles {count} times; at most {MAX_POINTS} sizes")
    raw = [lo * 2**i for i in range(count)]
    if raw[-1] < hi * (1 - 1e-9):
        raw.append(hi)
    return raw


def _geometric_steps(lo: float, hi: float, steps: str) -> list[float]:
    try:
        k = int(steps)
    except ValueError:
        raise SweepError(f"steps after ':' must be an integer; got {steps!r}") from None
    if not 2 <= k <= MAX_POINTS:
        raise SweepError(f"steps after ':' must be 2 to {MAX_POINTS}; got {k}")
    return [lo * (hi / lo) ** (i / (k - 1)) for i in range(k)]


# -- the plan -----------------------------------------------------------------------------------
@dataclass
class Point:
    value: Any
    status: str  # ok | failed | refused | cancelled | skipped
    result: RunResult | None = None
    message: str = ""

    @functools.cached_property
    def summary(self) -> Summary | None:
        """Summarised once: a point's samples can number thousands, and fits ask many times."""
        return self.result.summary if self.result is not None and self.result.usable else None

    @property
    def median(self) -> float | None:
        return self.summary.median if self.summary is not None else None

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        s = self.summary
        roof = r.roof_fields() if s is not None and r is not None else {}
        ok_roof = roof.get("status") == "ok"
        return {
            "value": self.value,
            "median": s.median if s else None,
            "low": s.p25 if s else None,
            "high": s.p75 if s else None,
            "n": s.n if s else 0,
            "gflops": r.gflops if s and r else None,
            "gbps": r.gbps if s and r else None,
            "roof_fraction": roof.get("fraction") if ok_roof else None,
            "roof_status": roof.get("status"),  # "stale": the point is above its stored roof
            "roof_s": roof_seconds(r, roof) if ok_roof and r is not None else None,
            "error": r.error if r is not None and r.error is not None and math.isfinite(r.error) else None,
            "unstable": bool(r is not None and s is not None and r.unstable),
            "noise": r.noise_lines(advice=False) if r is not None and s is not None else [],
            "status": self.status,
            "message": self.message,
        }


def roof_seconds(result: RunResult, roof: dict[str, Any]) -> float | None:
    """The fastest this step could be on this device: its work over the roof at its intensity."""
    attainable = roof.get("roof_gflops")
    if result.flops > 0 and attainable:
        return float(result.flops / (attainable * 1e9))
    bw = roof.get("bandwidth_gbs")
    if result.bytes > 0 and bw:
        return float(result.bytes / (bw * 1e9))
    return None


NO_WORK = (
    "no work counted: the code file defines no flops() or bytes() to fit time against; docs/your-code.md"
)


@dataclass
class Series:
    """One configuration (backend, device, dtype, lever, transfers) across the sizes."""

    template: RunSpec  # the configuration at the first size
    variant: str = "base"
    points: list[Point] = field(default_factory=list)
    stopped: str = ""  # why the larger sizes were not measured

    @property
    def label(self) -> str:
        return self.template.label()

    def spec_at(self, param: str, value: Any) -> RunSpec:
        return self.template.replace(params={**self.template.params, param: value})

    def work_kind(self) -> str:
        """'flops' for compute-heavy work, 'bytes' when the step mostly moves memory."""
        ok = [p.result for p in self.points if p.result is not None and p.median]
        if not ok:
            return "flops"
        r = ok[-1]
        return "flops" if r.flops > 0 and (r.bytes <= 0 or r.flops / r.bytes >= 1.0) else "bytes"

    def fit(self) -> Fit | None:
        kind = self.work_kind()
        pairs = [
            (p.result.flops if kind == "flops" else p.result.bytes, p.median)
            for p in self.points
            if p.result is not None and p.median and p.status == "ok"
        ]
        if not any(w > 0 for w, _ in pairs):
            # No work counted at any size (a code file without flops() or bytes()): a fit of time
            # against a work of 0 would read "time did not grow" under times that grew 50-fold.
            return None
        return fit_floor_rate(
            [w for w, _ in pairs], [t for _, t in pairs], "GFLOP/s" if kind == "flops" else "GB/s"
        )

    def work_at(self, param: str, value: float, kind: str) -> float | None:
        """This configuration's work (`kind`: flops or bytes) at any size, for the model's prediction."""
        try:
            workload = get_workload(self.template.workload)
            p = {**self.template.params, param: value}
            if kind == "flops":
                return float(workload.flops(p))
            return float(workload.bytes_moved(p, ITEMSIZE.get(self.template.dtype, 4)))
        except Exception:  # a user's flops() may raise anything: no prediction then
            return None

    def to_dict(self, param: str) -> dict[str, Any]:
        t = self.template
        fit = self.fit()
        return {
            "label": self.label,
            "backend": t.backend,
            "device": t.device,
            "dtype": t.dtype,
            "variant": self.variant,
            "transfers": t.transfers,
            "threads": t.threads,
            "stopped": self.stopped or None,
            "points": [p.to_dict() for p in self.points],
            "fit": fit.to_dict() if fit else self._no_fit(),
        }

    def _no_fit(self) -> dict[str, Any] | None:
        """Why there is no fit when sizes were measured but no work was counted (None: too few sizes)."""
        measured = [p for p in self.points if p.result is not None and p.median and p.status == "ok"]
        if len(measured) < 2:
            return None
        return {"none": NO_WORK}


@dataclass
class Sweep:
    scenario: str
    workload: str
    param: str
    values: list[Any]
    series: list[Series]
    refused: list[tuple[str, str]] = field(default_factory=list)  # (label, why) never run
    interrupted: bool = False

    @property
    def total(self) -> int:
        return len(self.values) * len(self.series)

    def reference(self, s: Series) -> Series:
        """Whom a series is compared with: NumPy on the CPU in its dtype, else the first series
        (so NumPy float64 is compared with the first, NumPy float32, and torch float64 with it)."""
        numpy = [x for x in self.series if x.template.backend == "numpy" and x.template.device == "cpu"]
        same = [x for x in numpy if x.template.dtype == s.template.dtype]
        ref = (same or numpy or self.series)[0]
        return self.series[0] if ref is s else ref

    def crossovers(self) -> list[dict[str, Any]]:
        out = []
        for s in self.series:
            ref = self.reference(s)
            if ref is not s:
                out.append(crossover(self.param, s, ref))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "workload": self.workload,
            "param": self.param,
            "values": self.values,
            "series": [s.to_dict(self.param) for s in self.series],
            "crossovers": self.crossovers(),
            "refused": [{"label": label, "reason": why} for label, why in self.refused],
            "interrupted": self.interrupted,
        }


def _fmt_value(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.3g}"


def crossover(param: str, a: Series, b: Series) -> dict[str, Any]:
    """Where `a` and `b` cross, measured (log-log interpolation) and predicted by their fits."""
    mb = {p.value: p.median for p in b.points if p.median and p.status == "ok"}
    common = [(p.value, p.median, mb[p.value]) for p in a.points if p.median and p.value in mb]
    out: dict[str, Any] = {"faster": a.label, "slower": b.label, "at": None, "predicted": None}
    if len(common) < 2:
        out["reason"] = f"too few sizes measured by both ({len(common)}) to place a crossover"
        return out
    xs = [float(v) for v, _, _ in common]
    at, changes = crossing(xs, [ta for _, ta, _ in common], [tb for _, _, tb in common])
    _, ta_last, tb_last = common[-1]
    faster, slower = (a, b) if ta_last < tb_last else (b, a)
    out["faster"], out["slower"] = faster.label, slower.label
    span = f"{param}={_fmt_value(xs[0])}–{_fmt_value(xs[-1])}"
    if at is None:
        out["reason"] = f"{slower.label} never faster over {span}"
    else:
        out["at"] = round(at, 1)
        out["reason"] = f"{faster.label} faster from {param}≈{_fmt_value(at)}" + (
            f" (the lines cross {changes} times: near parity, noise decides)" if changes > 1 else ""
        )
    fa, fb = a.fit(), b.fit()
    if fa is not None and fb is not None:
        out["predicted"] = _predicted(param, a, b, fa, fb, xs[0] / 4, xs[-1] * 16)
    return out


def _predicted(param: str, a: Series, b: Series, fa: Fit, fb: Fit, lo: float, hi: float) -> float | None:
    def model(s: Series, f: Fit) -> Callable[[float], float]:
        kind = s.work_kind()

        def t(x: float) -> float:
            w = s.work_at(param, x, kind)
            return f.predict(w) if w is not None else math.nan

        return t

    at = predicted_crossing(lo, hi, model(a, fa), model(b, fb))
    return round(at, 1) if at is not None else None


def plan_sweep(
    sc: Scenario,
    param: str,
    values: Sequence[Any],
    backends: Sequence[str],
    devices: Sequence[str],
    *,
    preset: str | None = None,
    dtypes: Sequence[str] = ("float32",),
    variants: Sequence[str] = ("base",),
    transfers: str = "off",
    probe_timeout: float | None = 30.0,
    **spec_kw: Any,
) -> Sweep:
    """Every configuration that can run here, each checked at the first size; the others refused."""
    base = sc.preset_params(sc.chosen_preset(preset))
    kind = _size_param(sc, param)
    checked = []
    for v in values:
        try:
            checked.append(kind.coerce(v))
        except ValueError as exc:
            raise SweepError(str(exc)) from None
    _check_transfers_and_variants(transfers, variants)
    sweep = Sweep(sc.name, sc.workload, param, checked, [])
    first = {**base, param: checked[0]}
    configurations = _configurations(backends, devices, dtypes, variants, transfers)
    for b, dev, dtype, v, moves in configurations:
        split = levers.split_variant(v, sc.workload)
        if split is None:  # a parameter variant of other workloads (runtime: inference)
            continue
        spec = RunSpec.make(sc.workload, {**first, **split[1]}, scenario=sc.name, backend=b, device=dev,
                            dtype=dtype, transfers=moves, **split[0], **spec_kw)  # fmt: skip
        verdict = check(spec, probe_timeout)
        if isinstance(verdict, Refusal):
            sweep.refused.append((spec.label(), str(verdict)))
        elif all(s.template != spec for s in sweep.series):
            sweep.series.append(Series(spec, v))
    return sweep


def _size_param(sc: Scenario, param: str) -> Param:
    """The scenario's parameter `param`, which must be numeric to be swept."""
    workload = get_workload(sc.workload)
    try:
        kind = workload.param(param)
    except KeyError:
        raise SweepError(f"{sc.name} has no parameter {param!r} {workload.params_known([param])}") from None
    if kind.kind not in (int, float):
        raise SweepError(f"{param} is not a size ({kind.kind.__name__}); sweep a numeric parameter")
    return kind


def _check_transfers_and_variants(transfers: str, variants: Sequence[str]) -> None:
    if transfers not in TRANSFER_MODES:
        raise SweepError(f"transfers must be one of {', '.join(TRANSFER_MODES)}; got {transfers!r}")
    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        raise SweepError(
            f"unknown variant(s) {', '.join(bad) or '(none)'}; choose from {', '.join(VARIANTS)}"
        )


def _configurations(
    backends: Sequence[str],
    devices: Sequence[str],
    dtypes: Sequence[str],
    variants: Sequence[str],
    transfers: str,
) -> Iterator[tuple[str, str, str, str, bool]]:
    """(backend, device, dtype, variant, transfers) in the sweep's order: variants are torch's
    levers, and host↔device copies mean nothing on the CPU."""
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[transfers]
    for b in backends:
        for dev in _devices_for(b, devices):
            for dtype in dtypes:
                for v in variants if b == "torch" else ("base",):
                    for moves in modes if dev != "cpu" else (False,):
                        yield b, dev, dtype, v, moves


def _devices_for(backend: str, devices: Sequence[str]) -> list[str]:
    """The devices a backend is asked on: NumPy is not asked about a GPU, CuPy not about the CPU,
    unless nothing else is left (then the refusal says why)."""
    if backend == "numpy":
        fit = [d for d in devices if d == "cpu"]
    elif backend == "cupy":
        fit = [d for d in devices if d != "cpu"]
    else:
        fit = list(devices)
    return fit or list(devices)


def run_sweep(
    sweep: Sweep,
    measure: Callable[..., RunResult],
    *,
    cancel: threading.Event | None = None,
    on_start: Callable[[Series, Any], None] | None = None,
    on_point: Callable[[Series, Point], None] | None = None,
    telemetry: Any = None,
) -> Sweep:
    """Smallest sizes first across every series (a stopped sweep still spans its configurations);
    a series stops at its first refused or out-of-memory size. `measure` has `runner.run`'s
    signature (the engine client's `measure`)."""
    cancel = cancel or threading.Event()
    for value in sweep.values:
        for s in sweep.series:
            if cancel.is_set():
                sweep.interrupted = True
                return sweep
            if s.stopped:
                continue
            if on_start:
                on_start(s, value)
            r = measure(s.spec_at(sweep.param, value), cancel=cancel, telemetry=telemetry)
            if r.status == "cancelled" and cancel.is_set():
                sweep.interrupted = True  # the point the stop interrupted is not a finished one
                return sweep
            point = Point(value, r.status, r, r.message)
            s.points.append(point)
            if r.status == "refused" or r.failure == "out-of-memory":
                s.stopped = f"stopped at {sweep.param}={value}: {r.message}"
            if on_point:
                on_point(s, point)
    return sweep


def sweep_values(sc: Scenario, param: str, text: str) -> list[Any]:
    """The sizes of `text` for the scenario's parameter `param` (integers for an integer one)."""
    return parse_values(text, integer=_size_param(sc, param).kind is int)


# -- a deck's sweep step ----------------------------------------------------------------------
SWEEP_STEP_FIELDS = {
    "over",
    "backends",
    "devices",
    "dtypes",
    "variants",
    "transfers",
    "budget_s",
    "max_step_s",
}


@dataclass(frozen=True)
class SweepStep:
    """What a deck's `[steps.sweep]` table asks for: the `gpuplay sweep` options, checked."""

    over: str  # PARAM=… as given (validated against the scenario)
    param: str
    values: tuple[Any, ...]
    backends: tuple[str, ...] = ("numpy", "torch")
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)
    variants: tuple[str, ...] = ("base",)
    transfers: str = "off"
    budget_s: float = 0.2
    max_step_s: float = 5.0


def parse_sweep_step(raw: Any, sc: Scenario) -> SweepStep:
    """Check a deck step's sweep table; SweepError names the field (`over`, `backends`, …)."""
    from gpuplay.core.spec import BACKENDS, DTYPES

    if not isinstance(raw, dict):
        raise SweepError("must be a table (over, backends, devices, dtypes, variants, transfers, budget_s)")
    unknown = set(raw) - SWEEP_STEP_FIELDS
    if unknown:
        raise SweepError(
            f"{sorted(unknown)[0]}: unknown field (known: {', '.join(sorted(SWEEP_STEP_FIELDS))})"
        )
    param, text, values = _step_over(raw, sc)
    transfers = raw.get("transfers", "off")
    if transfers not in TRANSFER_MODES:
        raise SweepError(f"transfers: must be one of {', '.join(TRANSFER_MODES)}; got {transfers!r}")
    return SweepStep(
        over=f"{param}={text}",
        param=param,
        values=tuple(values),
        backends=_step_names(raw, "backends", ("numpy", "torch"), BACKENDS),
        devices=_step_names(raw, "devices", ("cpu",), None),
        dtypes=_step_names(raw, "dtypes", ("float32",), DTYPES),
        variants=_step_names(raw, "variants", ("base",), tuple(VARIANTS)),
        transfers=transfers,
        budget_s=_step_seconds(raw, "budget_s", 0.2),
        max_step_s=_step_seconds(raw, "max_step_s", 5.0),
    )


def _step_over(raw: dict[str, Any], sc: Scenario) -> tuple[str, str, list[Any]]:
    """The step's `over` field: (parameter, sizes as written, the sizes), each size checked."""
    if not isinstance(raw.get("over"), str):
        raise SweepError('over: missing or not a string (e.g. over = "n=32..1024")')
    try:
        param, text = parse_over(raw["over"])
        values = sweep_values(sc, param, text)
        kind = get_workload(sc.workload).param(param)
        for v in values:
            kind.coerce(v)
    except (SweepError, ValueError) as exc:
        raise SweepError(f"over: {exc}") from None
    return param, text, values


def _step_names(
    raw: dict[str, Any], key: str, default: tuple[str, ...], allowed: Sequence[str] | None
) -> tuple[str, ...]:
    """A non-empty list of names, each among `allowed` (any name when `allowed` is None)."""
    value = raw.get(key, list(default))
    if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
        raise SweepError(f"{key}: must be a non-empty list of strings")
    bad = [x for x in value if allowed is not None and x not in allowed]
    if bad:
        raise SweepError(f"{key}: unknown {', '.join(bad)} (choose from {', '.join(allowed or ())})")
    return tuple(value)


def _step_seconds(raw: dict[str, Any], key: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 < value < 3600):
        raise SweepError(f"{key}: must be a number of seconds above 0; got {value!r}")
    return float(value)
