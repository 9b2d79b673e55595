"""Many measurements side by side, each against NumPy on the CPU with the same workload."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuplay.core.backends import get_backend
from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.planner import check, compute_dtype
from gpuplay.core.catalogue.scenarios import Scenario
from gpuplay.core.measure.stats import PairedSpeedup
from gpuplay.core.result import RunResult
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import get_workload

if TYPE_CHECKING:  # the runner measures in the engine: a front end that compares never imports it
    from gpuplay.core.runner import TelemetryWindow

# Levers a compare can add on top of each torch configuration.
VARIANTS: dict[str, dict[str, object]] = levers.variants()  # generated from core/catalogue/levers.py


def baseline_spec(spec: RunSpec) -> RunSpec:
    """NumPy on the CPU, same workload and size; same dtype where NumPy can, else float32."""
    dtype = spec.dtype
    workload = get_workload(spec.workload)
    p = dict(spec.params)
    if "method" in p:
        p["method"] = "auto"  # NumPy has only finite differences
    if p.get("runtime", "eager") != "eager":
        p["runtime"] = "eager"  # NumPy runs the forward pass by hand: no exported model to run
    params = workload.resolve(p)
    if dtype == "bfloat16" or workload.unsupported("numpy", "cpu", dtype, params):
        dtype = "float32"
    return RunSpec.make(
        spec.workload,
        p,
        scenario=spec.scenario,
        backend="numpy",
        device="cpu",
        dtype=dtype,
        **levers.shared_with_baseline(spec),  # timing, seed, threads, allocation: as the candidate's
    )


def is_baseline(spec: RunSpec) -> bool:
    return spec.backend == "numpy" and spec.device == "cpu"


def comparison_warnings(result: RunResult, baseline: RunResult) -> list[str]:
    out = []
    cd = result.compute_dtype or compute_dtype(result.spec)
    if cd != baseline.spec.dtype:
        out.append(f"mixed precision: {cd} here vs NumPy {baseline.spec.dtype}")
    if result.spec.workload == "autograd":
        method = get_workload("autograd").method(result.spec.backend, result.spec.params)  # type: ignore[attr-defined]
        if method == "autograd":
            out.append("algorithms differ: autograd vs NumPy finite differences")
    if result.conditions.get("transfers_timed") is False and result.spec.device.startswith("cuda"):
        out.append("host↔device transfers not timed")
    return out


@dataclass
class Row:
    result: RunResult
    baseline: RunResult | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def paired(self) -> PairedSpeedup | None:
        """The speedup measured in interleaved pairs with the baseline, if it was."""
        return PairedSpeedup.from_dict(self.result.speedup)

    @property
    def speedup(self) -> float | None:
        """Paired when measured so; else (an older log, a run without pairs) the ratio of two
        medians measured apart, which `speedup_marker` marks."""
        paired = self.paired
        if paired is not None:
            return paired.point
        if self.baseline is None or not self.baseline.median or not self.result.median:
            return None
        return self.baseline.median / self.result.median

    @property
    def speedup_interval(self) -> list[float] | None:
        paired = self.paired
        return paired.interval if paired is not None else None

    @property
    def speedup_pairs(self) -> int | None:
        paired = self.paired
        return paired.pairs if paired is not None else None

    @property
    def speedup_reason(self) -> str:
        """Why the speedup should not be read as printed; '' when it can."""
        if self.speedup is None or self.baseline is self.result:
            return ""
        paired = self.paired
        reasons = []
        if paired is None:
            reasons.append("unpaired: the NumPy baseline was measured apart, at another time")
        elif paired.wide:
            reasons.append(paired.reason())
        if self.result.unstable or self.result.noise_warnings:
            reasons.append("the noise check fired during this run")
        return "; ".join(reasons)

    @property
    def speedup_marker(self) -> str:
        """'~' before a speedup whose reason is one look away (details, notes, tooltip)."""
        return "~" if self.speedup_reason else ""


def attach_baselines(results: Sequence[RunResult], baselines: Iterable[RunResult] = ()) -> list[Row]:
    """Pair each result with its NumPy-CPU baseline among `results` and `baselines`."""
    pool = {r.spec: r for r in [*baselines, *results] if is_baseline(r.spec) and r.usable}
    rows = []
    for r in results:
        row = Row(r)
        if r.usable:
            try:
                # A NumPy-CPU row is its own baseline (1×), never another run of the same spec.
                base = r if is_baseline(r.spec) else pool.get(baseline_spec(r.spec))
            except (KeyError, ValueError):
                base = None
            if base is not None:
                row.baseline = base
                if base is not r:
                    row.warnings = comparison_warnings(r, base)
        rows.append(row)
    return rows


def plan_compare(
    scenarios: Iterable[Scenario],
    preset: str | None,
    backends: Sequence[str],
    *,
    dtype: str = "float32",
    variants: Sequence[str] = ("base",),
    probe_timeout: float | None = 30.0,
    params: Mapping[str, Any] | None = None,
    **spec_kw: object,
) -> tuple[list[RunSpec], list[tuple[RunSpec, Refusal]]]:
    """Every (scenario × backend × device × variant) that can run here, and the ones that cannot;
    `params` set over each scenario's preset (checked by the caller, as `run`'s are)."""
    specs: list[RunSpec] = []
    refused: list[tuple[RunSpec, Refusal]] = []
    for sc in scenarios:
        params_here = {**sc.preset_params(sc.chosen_preset(preset)), **(params or {})}
        for b in backends:
            avail, devs = get_backend(b).probe(probe_timeout)
            # An unavailable backend still gets one row, refused with the reason it is missing.
            ids = [d.id for d in devs] if avail.ok else ["cuda:0" if b == "cupy" else "cpu"]
            for dev in ids:
                for v in variants if b == "torch" else ("base",):
                    split = levers.split_variant(v, sc.workload)
                    if split is None:  # a parameter variant of other workloads (runtime: inference)
                        continue
                    fields, extra = split
                    methods: list[str | None] = [None]
                    if sc.workload == "autograd" and b == "torch" and params_here.get("method") == "auto":
                        methods = ["autograd", "fd"]  # device and algorithm told apart
                    for method in methods:
                        p = (
                            {**params_here, **extra}
                            if method is None
                            else {**params_here, **extra, "method": method}
                        )
                        spec = RunSpec.make(
                            sc.workload,
                            p,
                            scenario=sc.name,
                            backend=b,
                            device=dev,
                            dtype=dtype,
                            **fields,
                            **spec_kw,
                        )
                        verdict = check(spec, probe_timeout)
                        if isinstance(verdict, Refusal):
                            refused.append((spec, verdict))
                        else:
                            specs.append(spec)
    return with_baselines(specs, refused=[s for s, _ in refused]), refused


def with_baselines(specs: Sequence[RunSpec], refused: Iterable[RunSpec] = ()) -> list[RunSpec]:
    """The specs in order, each preceded by its NumPy-CPU baseline once, unless the planner
    refused that baseline (the data pipeline is torch's: no NumPy row): measured anyway, it came
    back refused and every `gpuplay compare` exited 1. The row's own paired run says why it has
    no speedup."""
    skip = set(refused)
    ordered: list[RunSpec] = []
    for s in specs:
        if not is_baseline(s):
            base = baseline_spec(s)
            if base not in ordered and base not in skip:
                ordered.append(base)
        if s not in ordered:
            ordered.append(s)
    return ordered


def run_compare(
    specs: Sequence[RunSpec],
    *,
    cancel: threading.Event | None = None,
    on_start: Callable[[int, RunSpec], None] | None = None,
    on_result: Callable[[int, RunResult], None] | None = None,
    telemetry: TelemetryWindow | None = None,
    measure: Callable[..., RunResult] | None = None,
    paired: bool = True,
) -> list[RunResult]:
    """Run each spec in turn (never two at once: they would perturb each other).

    `on_result` is called the moment each measurement finishes, so a caller can log it
    before the next one starts; `measure` has `engine.measure`'s signature. Each row that
    is not a baseline is timed in interleaved pairs with its baseline (its own speedup with an
    interval), unless `paired` is False. A baseline row that a later row is paired with is not
    measured alone: its row is the baseline side of the first such row's pairs (`on_baseline`),
    reported (index and all) just before that row's; measured alone only where those pairs gave
    none (the row failed or was refused first). The results keep the order of `specs`.
    """
    if measure is None:
        from gpuplay.core.engine import measure as engine_measure

        measure = engine_measure
    cancel = cancel or threading.Event()
    slot = _paired_baselines(specs) if paired else {}
    found: dict[int, RunResult] = {}

    def report(i: int, r: RunResult) -> None:
        found[i] = r
        if on_result:
            on_result(i, r)

    for i, spec in enumerate(specs):
        if cancel.is_set():
            break
        if spec in slot and slot[spec] == i:
            continue  # its row comes from the pairs of a later row
        if on_start:
            on_start(i, spec)
        base = baseline_spec(spec) if paired and not is_baseline(spec) else None
        j = slot.get(base) if base is not None else None
        if j is None or j in found:
            report(i, measure(spec, cancel=cancel, telemetry=telemetry, paired_with=base))
            continue
        r, base_row = _measure_both(spec, (j, specs[j]), measure, cancel, telemetry, on_start)
        if base_row is not None:
            report(j, base_row)
        report(i, r)
    return [found[i] for i in sorted(found)]


def _measure_both(
    spec: RunSpec,
    at: tuple[int, RunSpec],
    measure: Callable[..., RunResult],
    cancel: threading.Event,
    telemetry: TelemetryWindow | None,
    on_start: Callable[[int, RunSpec], None] | None,
) -> tuple[RunResult, RunResult | None]:
    """`spec` paired with `base` (row `j`), and `base`'s row from those pairs; measured alone where the
    pairs gave none (`spec` failed or was refused first); None when cancelled."""
    j, base = at
    heard: list[RunResult] = []
    r = measure(spec, cancel=cancel, telemetry=telemetry, paired_with=base, on_baseline=heard.append)
    if not heard and r.status != "cancelled" and not cancel.is_set():
        if on_start:
            on_start(j, base)
        heard.append(measure(base, cancel=cancel, telemetry=telemetry, paired_with=None))
    return r, (heard[0] if heard else None)


def _paired_baselines(specs: Sequence[RunSpec]) -> dict[RunSpec, int]:
    """The baselines among `specs` that a later row is paired with, and where each stands."""
    out: dict[RunSpec, int] = {}
    for i, s in enumerate(specs):
        later = specs[i + 1 :]
        if (
            is_baseline(s)
            and s not in out
            and any(not is_baseline(t) and baseline_spec(t) == s for t in later)
        ):
            out[s] = i
    return out
