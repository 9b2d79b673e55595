"""The levers checklist run on one target: one change at a time, each one proved.

A ladder of rungs in a fixed order (the checklist's: confirm the baseline, move to the device,
inference_mode, AMP, TF32, torch.compile, CUDA graphs, then the workload's own levers). Each rung
that applies is one change on top of the best configuration so far, timed in interleaved pairs
against that configuration (not against the baseline: a rung's gain depends on the rungs below
it), and kept only when its speedup's 95 % interval lies above 1 and its result passes the
float64 check at its tolerance. A rung this machine cannot run is listed with the planner's
reason. One time budget covers the whole ladder, compile time included; what a rung leaves of its
share passes to the next. The winner is then timed against the baseline directly (the verdict's
speedup and interval: a product of intervals is not an interval) and profiled, and one sentence
says what limits it now.

No front end here: the CLI (cli/tune.py), the Python API and the app's Tune tab drive `Ladder`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplay.core.catalogue.planner import check
from gpuplay.core.measure.stats import PairedSpeedup
from gpuplay.core.result import RunResult
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.studies.compare import baseline_spec
from gpuplay.core.workloads import get_workload

DEFAULT_BUDGET_S = 120.0
MIN_BUDGET_S = 5.0
MAX_BUDGET_S = 3600.0
LINALG = ("svd", "eigh", "solve", "lstsq")
ORDER = (
    "baseline → device → inference_mode → AMP bf16 → AMP fp16 → TF32 → compile default → "
    "reduce-overhead → max-autotune → CUDA graphs → attention backend → linalg library → "
    "inference runtimes → loader workers, pinned memory"
)

Measure = Callable[..., RunResult]  # core.engine.measure's signature


@dataclass(frozen=True)
class RungDef:
    """One rung of the checklist: the change it makes on top of the best so far."""

    name: str
    title: str
    fields: dict[str, Any] = field(default_factory=dict)  # RunSpec fields
    params: dict[str, Any] = field(default_factory=dict)  # workload parameters
    weight: float = 1.0  # its share of the budget (compile and builds count their time)
    kind: str = "lever"  # baseline | device | lever | compile | runtime | final


@dataclass
class Rung:
    """A rung as planned and, once measured, its outcome."""

    name: str
    title: str
    kind: str = "lever"
    weight: float = 1.0
    status: str = "pending"  # pending | measured | dropped | refused
    kept: bool = False
    reason: str = ""
    spec: RunSpec | None = None
    against: str = ""  # the configuration it was paired with
    result: RunResult | None = None
    share_s: float = 0.0
    elapsed_s: float | None = None
    cumulative: float | None = None  # product of the kept rungs' speedups up to this one

    @property
    def configuration(self) -> str:
        return config_label(self.spec) if self.spec is not None else ""

    @property
    def paired(self) -> PairedSpeedup | None:
        return PairedSpeedup.from_dict(self.result.speedup) if self.result is not None else None

    @property
    def median(self) -> float | None:
        r = self.result
        return _finite(r.median) if r is not None and r.usable else None

    @property
    def speedup(self) -> float | None:
        p = self.paired
        return _finite(p.point) if p is not None else None

    @property
    def interval(self) -> list[float] | None:
        p = self.paired
        iv = p.interval if p is not None else None
        if iv is None or not all(math.isfinite(x) for x in iv):
            return None
        return iv

    @property
    def error(self) -> float | None:
        return _finite(self.result.error) if self.result is not None else None

    @property
    def tolerance(self) -> float | None:
        return _finite(self.result.tolerance) if self.result is not None else None

    @property
    def changes_numerics(self) -> bool:
        s = self.spec
        return s is not None and (s.amp != "off" or s.tf32)

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "name": self.name,
            "title": self.title,
            "configuration": self.configuration,
            "against": self.against,
            "status": self.status,
            "kept": self.kept,
            "reason": self.reason,
            "median": self.median,
            "speedup": self.speedup,
            "interval": self.interval,
            "pairs": self.paired.pairs if self.paired is not None else None,
            "cumulative": _finite(self.cumulative),
            "error": self.error,
            "tolerance": self.tolerance,
            "compile_s": _finite(r.compile_s) if r is not None else None,
            "build_s": _finite(r.build_s) if r is not None else None,
            "share_s": round(self.share_s, 2),
            "elapsed_s": None if self.elapsed_s is None else round(self.elapsed_s, 2),
            "conditions": _clean(dict(r.conditions)) if r is not None else {},
        }


@dataclass
class Ladder:
    """The rungs of one target, in order, and what they came to."""

    target: str
    device: str
    budget_s: float
    rungs: list[Rung]
    total: Rung | None = None  # the winner timed against the baseline directly
    profile: dict[str, Any] | None = None
    limit: str = ""  # one sentence: what limits the winner now
    interrupted: bool = False

    @property
    def baseline(self) -> Rung:
        return self.rungs[0]

    @property
    def kept(self) -> list[Rung]:
        """The kept rungs after the baseline, in order."""
        return [r for r in self.rungs[1:] if r.kept]

    @property
    def tried(self) -> list[Rung]:
        """The rungs after the baseline that were measured (kept or not), or began and failed."""
        return [r for r in self.rungs[1:] if r.result is not None]

    @property
    def winner(self) -> RunSpec | None:
        best = [r for r in self.rungs if r.kept and r.spec is not None]
        return best[-1].spec if best else None

    def budget_line(self) -> str:
        shares = ", ".join(f"{r.name} {r.share_s:.0f} s" for r in self.rungs if r.status != "refused")
        return (
            f"budget {self.budget_s:g} s for the whole ladder, compile and build time included "
            f"(what a rung leaves passes to the next): {shares}"
        )

    @property
    def verdict(self) -> str:
        if self.baseline.status not in ("measured", "pending"):
            return f"no ladder: the baseline did not run ({self.baseline.reason})"
        n, k = len(self.tried), len(self.kept)
        refused = sum(r.status == "refused" for r in self.rungs)
        head = f"kept {k} of {n} rung{'s' if n != 1 else ''}"
        total = self.total
        if total is not None and total.speedup is not None:
            iv = total.interval
            span = f" [{iv[0]:.2g}–{iv[1]:.2g}]" if iv else ""
            head += f": {total.speedup:.3g}×{span} over the baseline, measured side by side"
        elif k == 0:
            head += ": the baseline stays the best configuration"
        if self.winner is not None and k:
            head += f" ({config_label(self.winner)})"
        parts = [head]
        if total is not None and total.status == "dropped" and total.reason:
            parts.append(f"the winner against the baseline: {total.reason}")
        if refused:
            parts.append(f"{refused} refused here")
        if self.interrupted:
            parts.append("interrupted: the finished rungs are kept")
        if self.limit:
            parts.append(self.limit)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "device": self.device,
            "budget_s": self.budget_s,
            "order": ORDER,
            "rungs": [r.to_dict() for r in self.rungs],
            "total": self.total.to_dict() if self.total is not None else None,
            "profile": _profile_summary(self.profile),
            "limit": self.limit,
            "interrupted": self.interrupted,
            "verdict": self.verdict,
        }


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def _clean(value: Any) -> Any:
    """JSON-safe: a non-finite float in a result's conditions becomes None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def config_label(spec: RunSpec) -> str:
    """The spec's label plus the workload parameters a rung changes."""
    if spec.backend != "torch":  # the torch parameters mean nothing to NumPy's form
        return spec.label()
    extra = [f"{k}={spec.params[k]}" for k in ("mode", "sdpa", "workers", "pin") if k in spec.params]
    return " ".join([spec.label(), *extra])


def cpu_has_bf16(cpuinfo: str | None = None) -> bool | None:
    """Whether this CPU computes bfloat16 natively (x86 avx512_bf16 or amx_bf16, Arm bf16);
    None where /proc/cpuinfo cannot say (another OS)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")[:200_000]
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return None


def rung_defs(workload: str, params: dict[str, Any]) -> list[RungDef]:
    """The checklist's rungs that apply to this workload, in the fixed order."""
    defs = [
        RungDef("baseline", "the code as given", kind="baseline"),
        RungDef("device", "move to the device", kind="device"),
    ]
    if "mode" in params and workload == "inference":
        defs.append(RungDef("inference_mode", "torch.inference_mode", params={"mode": "inference"}))
    defs += [
        RungDef("amp-bf16", "AMP bfloat16", fields={"amp": "bf16"}),
        RungDef("amp-fp16", "AMP float16", fields={"amp": "fp16"}),
        RungDef("tf32", "TF32 matmuls", fields={"tf32": True}),
        RungDef("compile", "torch.compile default", fields={"compile": "default"}, weight=3, kind="compile"),
        RungDef(
            "compile-ro",
            "torch.compile reduce-overhead",
            fields={"compile": "reduce-overhead"},
            weight=3,
            kind="compile",
        ),  # fmt: skip
        RungDef(
            "compile-ma",
            "torch.compile max-autotune",
            fields={"compile": "max-autotune"},
            weight=3,
            kind="compile",
        ),  # fmt: skip
        RungDef("graphs", "CUDA graphs", fields={"cuda_graphs": True}),
    ]
    if workload == "attention":
        defs += [RungDef(f"sdpa-{b}", f"attention backend {b}", params={"sdpa": b})
                 for b in ("flash", "efficient", "cudnn", "math")]  # fmt: skip
    if workload in LINALG:
        defs += [RungDef(f"linalg-{lib}", f"linalg library {lib}", fields={"linalg_library": lib})
                 for lib in ("cusolver", "magma")]  # fmt: skip
    if workload == "inference":
        defs += [
            RungDef(rt, title, params={"runtime": rt}, weight=2, kind="runtime")
            for rt, title in (("torchscript", "TorchScript"), ("onnxruntime", "ONNX Runtime"),
                              ("tensorrt", "TensorRT"))
        ]  # fmt: skip
    if workload == "dataloader":
        defs += [
            RungDef("workers-2", "2 loader workers", params={"workers": 2}),
            RungDef("workers-4", "4 loader workers", params={"workers": 4}),
            RungDef("pin", "pinned memory", params={"pin": "on"}),
        ]
    return defs


def _own_refusal(d: RungDef, spec: RunSpec, best: RunSpec) -> str | None:
    """What the ladder itself refuses before asking the planner: a rung that would measure nothing."""
    cpu = spec.device == "cpu"
    if d.fields.get("amp"):
        if not get_workload(spec.workload).amp_eligible:
            return "no autocast-eligible op in this workload: AMP would still compute in float32"
        if spec.dtype != "float32":
            return f"AMP autocasts float32 code; this target runs in {spec.dtype}"
        if cpu and d.fields["amp"] == "fp16":
            return (
                "float16 autocast pays on tensor-core devices; this is a CPU (bfloat16 is its half precision)"
            )
        if cpu and d.fields["amp"] == "bf16" and cpu_has_bf16() is False:
            return "this CPU has no native bfloat16 (no avx512_bf16, amx_bf16 or bf16 flag): autocast would emulate it"
    if cpu and d.fields.get("compile") == "reduce-overhead":
        return "reduce-overhead's gain is CUDA graphs, which a CPU has not: it behaves as the default mode"
    if all(best.params.get(k) == v for k, v in d.params.items()) and all(
        getattr(best, k) == v for k, v in d.fields.items()
    ):
        return "the configuration has it already"
    return None


AUTOCAST_BLIND = ("onnxruntime", "tensorrt")  # runtimes that run an exported graph, not torch's ops


def _candidate(d: RungDef, torch_best: RunSpec) -> RunSpec:
    """The rung's change on top of the best torch configuration so far."""
    spec = torch_best
    if d.kind == "runtime":
        # a runtime replaces the eager module that torch.compile and CUDA graphs would wrap
        spec = spec.replace(compile="off", cuda_graphs=False)
        if d.params.get("runtime") in AUTOCAST_BLIND:
            # torch.autocast does not reach an exported graph: it runs in the spec's dtype, so
            # it is named and judged as that (an ORT rung read "+amp:bf16" at AMP's tolerance
            # with a float32 error, 2.6e-07)
            spec = spec.replace(amp="off")
    if d.fields:
        spec = spec.replace(**d.fields)
    if d.params:
        spec = spec.replace(params={**spec.params, **d.params})
    return spec


def plan_ladder(
    spec: RunSpec,
    device: str,
    target: str,
    budget_s: float = DEFAULT_BUDGET_S,
    probe_timeout: float | None = 30.0,
) -> Ladder:
    """The ladder for `spec` (the target at its preset, as `run` would measure it) on `device`:
    the baseline and each rung's planned configuration, refused ones with their reasons. A rung's
    configuration is final only once the rungs below it are measured (`run_ladder`)."""
    workload = get_workload(spec.workload)
    params = workload.resolve(spec.params)
    defs = rung_defs(spec.workload, params)
    on_device = spec.replace(backend="torch", device=device, params=params)
    if "mode" in params and spec.workload == "inference":
        on_device = on_device.replace(params={**on_device.params, "mode": "grad"})
    numpy_form = baseline_spec(on_device)
    has_numpy = not isinstance(check(numpy_form, probe_timeout), Refusal)
    base_spec = numpy_form if has_numpy else on_device.replace(device="cpu")
    rungs: list[Rung] = []
    for d in defs:
        rung = Rung(d.name, d.title, kind=d.kind, weight=d.weight)
        if d.kind == "baseline":
            rung.spec = base_spec
            rung.title = "the code as given: " + ("NumPy on the CPU" if has_numpy else "torch on the CPU")
        elif d.kind == "device":
            rung.spec = on_device
            rung.title = f"move to torch on {device}"
            if not has_numpy and device == "cpu":
                rung.status, rung.reason = (
                    "refused",
                    "no NumPy form: the baseline is torch on the CPU already",
                )
        else:
            rung.spec = _candidate(d, on_device)
            own = _own_refusal(d, rung.spec, on_device)
            if own:
                rung.status, rung.reason = "refused", own
        if rung.status != "refused" and rung.spec is not None:
            verdict = check(rung.spec, probe_timeout)
            if isinstance(verdict, Refusal):
                rung.status, rung.reason = "refused", _refusal_text(verdict)
        rungs.append(rung)
    ladder = Ladder(target, device, budget_s, rungs)
    _share(ladder)
    return ladder


def _refusal_text(r: Refusal) -> str:
    return r.reason + (f" ({r.hint})" if getattr(r, "hint", "") else "")


def _share(ladder: Ladder) -> None:
    """Split the budget over the rungs that will run, and one share for the final pairing."""
    live = [r for r in ladder.rungs if r.status != "refused"]
    units = sum(r.weight for r in live) + 1.0  # + the winner against the baseline
    for r in live:
        r.share_s = ladder.budget_s * r.weight / units
    ladder.total = Rung("total", "the winner against the baseline", kind="final")
    ladder.total.share_s = ladder.budget_s / units


def _measure_budget(rung: Rung, share: float) -> float:
    """The timed window per side of the rung's pairs: a fraction of its share (a paired run
    lasts up to two windows plus warm-up, set-up and the check; a compile or build more)."""
    frac = {"compile": 0.08, "runtime": 0.12}.get(rung.kind, 0.2)
    return max(0.05, min(5.0, share * frac))


def _with_budget(spec: RunSpec, budget: float) -> RunSpec:
    return spec.replace(budget_s=round(budget, 3), repeat=None)


def judge(rung: Rung) -> None:
    """Kept or dropped, and why, from the rung's finished result."""
    r = rung.result
    if r is None:
        return
    if r.status == "refused":  # refused where the engine planned it (a kernel torch turns down here)
        rung.status, rung.reason = "refused", r.message or "refused"
        return
    if r.status != "ok" or not r.usable:
        rung.status = "dropped"
        rung.reason = f"{r.status}: {r.message}" if r.message else r.status
        return
    rung.status = "measured"
    ok = r.check_ok
    p = rung.paired
    if ok is False:
        rung.reason = f"failed the float64 check: error {r.error:.2g} > tolerance {r.tolerance:.2g}"
        return
    if ok is None:
        rung.reason = "not checked against float64: a rung is kept only when its result is"
        return
    if p is None:
        note = next((n for n in r.notes if n.startswith("no speedup")), "")
        rung.reason = note or "no paired speedup"
        return
    iv = rung.interval
    if iv is None:
        rung.reason = f"{p.point:.3g}× from {p.pairs} pairs: too few for an interval"
        return
    span = f"{p.point:.3g}× [{iv[0]:.3g}–{iv[1]:.3g}]"
    if iv[0] > 1.0:
        rung.kept = True
        rung.reason = f"kept: {span}" + (f", error {r.error:.2g}" if rung.changes_numerics else "")
    elif iv[1] < 1.0:
        rung.reason = f"slower: {span}"
    else:
        rung.reason = f"within noise: {span}, the interval holds 1"


BASELINE_FLOOR_S = 1.0  # the baseline's share at least, however short the ladder's budget
GRACE_S = {"baseline": 30.0}  # the first measurement also starts the engine and imports its libraries
DEFAULT_GRACE_S = 3.0
FLOOR_STEPS = 48  # steps of the best so far a rung may take whatever its share (2 × 8 pairs + warm-ups)
# Seconds a rung may take whatever its share: a paired run's set-up, warm-ups, check and energy
# phase take seconds even for a µs step (a 64² matmul's rungs on the simulated H100 were stopped
# at 2-3 s on the loaded 2-core machine, each with its pairs done).
FLOOR_S = 10.0


def run_ladder(
    ladder: Ladder,
    measure: Measure,
    *,
    cancel: threading.Event | None = None,
    on_rung: Callable[[int, Rung], None] | None = None,
    on_start: Callable[[int, Rung], None] | None = None,
    profile: Callable[[RunSpec], dict[str, Any]] | None = None,
    probe_timeout: float | None = 30.0,
) -> Ladder:
    """Measure each rung in order against the best so far (`measure` has core.engine.measure's
    signature). `on_rung` hears each rung once it is decided (refused ones too, in their place);
    a cancel keeps the finished rungs and marks the rest not run."""
    walk = _Walk(ladder, measure, cancel or threading.Event(), on_start, probe_timeout)
    for i, rung in enumerate(ladder.rungs):
        walk.step(i, rung)
        if on_rung:
            on_rung(i, rung)
    walk.final()
    winner = ladder.winner
    if winner is not None and winner.backend == "numpy":
        ladder.limit = ""  # the verdict says the baseline stays; torch.profiler cannot see NumPy
    elif winner is not None and profile is not None and not walk.cancel.is_set():
        ladder.profile = profile(winner)
        ladder.limit = limit_sentence(ladder.profile, ladder.rungs)
    return ladder


class _Walk:
    """The ladder's state while it is walked: the best so far, the clock, the kept product."""

    def __init__(
        self,
        ladder: Ladder,
        measure: Measure,
        cancel: threading.Event,
        on_start: Callable[[int, Rung], None] | None,
        probe_timeout: float | None,
    ) -> None:
        self.ladder, self.measure, self.cancel, self.on_start = ladder, measure, cancel, on_start
        self.probe_timeout = probe_timeout
        self.start = time.monotonic()
        self.best: RunSpec | None = None
        self.torch_best: RunSpec | None = None
        self.cumulative = 1.0
        self.best_median = 0.0  # seconds per step of the best so far
        self.stopped = ""  # why the rest is not run

    def step(self, i: int, rung: Rung) -> None:
        if rung.status == "refused":
            return
        if self.cancel.is_set():
            self.ladder.interrupted = True
            self.stopped = "interrupted"
        if self.stopped:
            rung.status, rung.reason = "dropped", f"not run: {self.stopped}"
            return
        left = self._left(i, rung)
        if rung.kind not in ("baseline", "device") and not self._configure(rung):
            return
        assert rung.spec is not None
        if left <= 0.5:
            if rung.kind != "baseline":
                rung.status, rung.reason = "dropped", "not run: the ladder's budget was spent"
                return
            # Every rung is paired with the baseline or what was kept on top of it: it runs
            # whatever its share (`--budget-total 6` on inference gave it 0.4 s and it was dropped,
            # while a compile rung with a larger weight then ran with nothing to pair with).
            left = BASELINE_FLOOR_S
        rung.share_s = max(left, 0.0)  # its time as it starts: what the rungs before it left
        rung.spec = _with_budget(rung.spec, _measure_budget(rung, left))
        against = self.best if rung.kind != "baseline" else None
        rung.against = config_label(against) if against is not None else ""
        if self.on_start:
            self.on_start(i, rung)
        t0 = time.monotonic()
        grace = GRACE_S.get(rung.kind, DEFAULT_GRACE_S)
        # The least pairs an interval needs, however short the share: MIN_PAIRS pairs of two steps
        # each, with warm-ups, set-ups and checks (a share shorter than that would drop every rung).
        floor = max(FLOOR_S, FLOOR_STEPS * self.best_median)
        rung.result, timed_out = _timed(
            self.measure, rung.spec, against, self.cancel, max(left, floor) + grace
        )
        rung.elapsed_s = time.monotonic() - t0
        if rung.kind == "baseline":
            self._baseline(rung)
        else:
            self._judged(rung, timed_out, left)
        if rung.kind == "device" or (rung.kept and rung.spec.backend == "torch"):
            self.torch_best = rung.spec  # the torch rungs build on the device move even when it was slower

    def _left(self, i: int, rung: Rung) -> float:
        """The rung's time: what is left of the budget, split again over the rungs still to run
        by their weights (one unit for the final pairing), so a rung that took less than its
        share gives the rest to those after it, and one that took more takes from all of them."""
        remaining = self.ladder.budget_s - (time.monotonic() - self.start)
        later = [r for r in self.ladder.rungs[i:] if r.status not in ("refused", "dropped")]
        units = sum(r.weight for r in later) + 1.0
        return remaining * rung.weight / units

    def _configure(self, rung: Rung) -> bool:
        """The rung's change on top of the best torch configuration so far, if it can run."""
        if self.torch_best is None:
            return rung.spec is not None
        spec = _rebuild(rung, self.torch_best)
        if spec is None:
            return False
        verdict = check(spec, self.probe_timeout)
        rung.spec = spec
        if isinstance(verdict, Refusal):
            rung.status, rung.reason = "refused", _refusal_text(verdict)
            return False
        return True

    def _baseline(self, rung: Rung) -> None:
        r = rung.result
        assert r is not None
        if r.status == "ok" and r.usable:
            rung.status, rung.kept, rung.reason, rung.cumulative = "measured", True, "the reference", 1.0
            self.best = rung.spec
            self.best_median = rung.median or 0.0
            return
        rung.status, rung.reason = "dropped", f"{r.status}: {r.message}"
        if self.cancel.is_set():
            self.ladder.interrupted = True
            self.stopped = "interrupted"
        else:
            self.stopped = "the baseline did not run"

    def _judged(self, rung: Rung, timed_out: bool, left: float) -> None:
        r = rung.result
        assert r is not None
        if timed_out:
            rung.status = "dropped"
            rung.reason = f"out of time: its share of the budget ({left:.0f} s) ran out" + (
                f" (compile {r.compile_s:.0f} s)" if r.compile_s else ""
            )
        elif r.status == "cancelled" and self.cancel.is_set():
            self.ladder.interrupted = True
            rung.status, rung.reason = "dropped", "interrupted"
        else:
            judge(rung)
        if rung.speedup is not None:
            rung.cumulative = self.cumulative * rung.speedup
        if rung.kept:
            if self.best is not None and rung.spec is not None and self.best.backend != rung.spec.backend:
                rung.reason += f" (paired with {config_label(self.best)}: the device move is in it)"
            self.cumulative *= rung.speedup or 1.0
            self.best = rung.spec
            self.best_median = rung.median or self.best_median

    def final(self) -> None:
        """The winner timed against the baseline directly: the verdict's speedup and interval."""
        ladder, total = self.ladder, self.ladder.total
        base, winner = ladder.baseline.spec, ladder.winner
        if total is None or base is None or winner is None or winner == base or self.cancel.is_set():
            return
        left = max(ladder.budget_s - (time.monotonic() - self.start), total.share_s)
        total.spec = _with_budget(winner, _measure_budget(total, left))
        total.against = config_label(base)
        if self.on_start:
            self.on_start(len(ladder.rungs), total)
        t0 = time.monotonic()
        floor = max(FLOOR_S, FLOOR_STEPS * max(self.best_median, ladder.baseline.median or 0.0))
        total.result, timed_out = _timed(
            self.measure, total.spec, base, self.cancel, max(left, floor) + DEFAULT_GRACE_S
        )
        total.elapsed_s = time.monotonic() - t0
        if timed_out:
            total.status, total.reason = "dropped", f"out of time ({left:.0f} s left of the budget)"
        else:
            judge(total)
        total.kept = False
        total.cumulative = total.speedup


def _rebuild(rung: Rung, torch_best: RunSpec) -> RunSpec | None:
    """The rung's configuration on top of the best torch configuration measured so far."""
    defs = {d.name: d for d in rung_defs(torch_best.workload, torch_best.params)}
    d = defs.get(rung.name)
    if d is None:
        return rung.spec
    spec = _candidate(d, torch_best)
    own = _own_refusal(d, spec, torch_best)
    if own:
        rung.spec, rung.status, rung.reason = spec, "refused", own
        return None
    return spec


def _timed(
    measure: Measure, spec: RunSpec, against: RunSpec | None, cancel: threading.Event, limit_s: float
) -> tuple[RunResult, bool]:
    """`measure` with a cancel that fires on the user's cancel or once `limit_s` has passed."""
    mine = threading.Event()
    done = threading.Event()
    out_of_time = [False]
    deadline = time.monotonic() + max(1.0, limit_s)

    def watch() -> None:
        while not done.wait(0.1):
            if cancel.is_set():
                mine.set()
                return
            if time.monotonic() >= deadline:
                out_of_time[0] = True
                mine.set()
                return

    t = threading.Thread(target=watch, name="gpuplay-tune-watch", daemon=True)
    t.start()
    try:
        r = measure(spec, cancel=mine, paired_with=against)
    finally:
        done.set()
        t.join(1.0)
    return r, out_of_time[0] and not cancel.is_set()


def _profile_summary(data: dict[str, Any] | None) -> dict[str, Any] | None:
    if not data:
        return None
    keep = ("status", "message", "label", "tool", "wall_ms_per_step", "busy_ms_per_step",
            "kernels_per_step", "overhead_share", "overhead_definition")  # fmt: skip
    out = {k: data.get(k) for k in keep if k in data}
    out["top_ops"] = [dict(o) for o in (data.get("top_ops") or [])[:5] if isinstance(o, dict)]
    return _clean(out)


def _operator(name: Any) -> bool:
    text = str(name or "")
    return bool(text) and not text.startswith(("#", "ProfilerStep", "[")) and "CompiledFxGraph" not in text


def limit_sentence(profile: dict[str, Any] | None, rungs: list[Rung]) -> str:
    """One sentence: what limits the winner now, from its profile and its own split."""
    winner = [r for r in rungs if r.kept]
    result = winner[-1].result if winner else None
    split = result.split if result is not None else {}
    if split and split.get("data_wait_s"):
        waits = [x for x in split["data_wait_s"] if math.isfinite(x)]
        totals = [
            sum(v)
            for v in zip(*(split.get(k, []) for k in ("data_wait_s", "h2d_s", "model_s")), strict=False)
        ]
        if waits and totals and sum(totals) > 0:
            share = sum(waits) / sum(totals)
            if share >= 0.5:
                return f"now limited by the data pipeline: {share:.0%} of each step waits for the batch"
            return f"now limited by the model: the data wait is {share:.0%} of each step"
    runtime = (
        winner[-1].spec.params.get("runtime") if winner and winner[-1].spec is not None else None
    ) or "eager"
    if runtime in ("onnxruntime", "tensorrt"):
        return (
            f"the winner runs in {runtime}, whose kernels torch.profiler does not see: its own profiler "
            "says what limits it now"
        )
    if not profile:
        return ""
    if profile.get("status") != "ok":
        msg = str(profile.get("message", ""))[:200]
        return f"no profile of the winner: {msg}" if msg else ""
    share = _finite(profile.get("overhead_share"))
    # torch.profiler's own markers ("## Call CompiledFxGraph <hash> ##", "ProfilerStep") wrap the ops
    ops = [o for o in (profile.get("top_ops") or []) if isinstance(o, dict) and _operator(o.get("name"))]
    top = ops[0] if ops else None
    if share is not None and share >= 0.5:
        return (
            f"now limited by per-op overhead: {share:.0%} of each step is outside "
            f"{'kernels' if 'cuda' in (profile.get('activities') or []) else 'operators'} "
            "(fewer, larger ops pay: a bigger batch, compile, CUDA graphs)"
        )
    if top is not None:
        busy = _finite(profile.get("busy_ms_per_step"))
        own = _finite(top.get("device_ms")) or _finite(top.get("self_cpu_ms"))
        pct = f" ({own / busy:.0%} of the busy time)" if own and busy else ""
        return f"now limited by compute in {str(top.get('name', '?'))[:60]}{pct}"
    return ""


def best_device(probe_timeout: float | None = 30.0) -> str:
    """The best device torch sees here: the first CUDA device, else Intel's, else Apple's, else the CPU."""
    from gpuplay.core.backends import get_backend

    avail, devices = get_backend("torch").probe(probe_timeout)
    ids = [d.id for d in devices] if avail.ok else []
    for prefix in ("cuda", "xpu", "mps"):
        for i in ids:
            if i.startswith(prefix):
                return i
    return "cpu"


def engine_profile(spec: RunSpec) -> dict[str, Any]:
    """gpuplay's profile of `spec` (a few steps under torch.profiler), in the engine process."""
    from gpuplay.core.engine.client import in_process, shared_client

    if in_process():
        from gpuplay.core.runner.profile import profile_spec

        return profile_spec(spec)
    return shared_client().profile(spec)


COLUMNS = ("rung", "configuration", "median", "speedup [95%]", "cumul.", "error", "outcome")


def _time(s: float | None) -> str:
    if s is None:
        return "—"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def rung_cells(r: Rung) -> list[str]:
    """One ladder row as words: what the table, the markdown, the CSV and the app show."""
    iv = r.interval
    speed = "—" if r.speedup is None else f"{r.speedup:.3g}×" + (f" [{iv[0]:.3g}–{iv[1]:.3g}]" if iv else "")
    if r.kind == "baseline" and r.status == "measured":
        speed = "1×"
    res = r.result
    err = "—"
    if r.error is not None:
        err = f"{r.error:.2g}"
        if r.tolerance is not None:
            err += (" ≤ " if res is not None and res.check_ok else " > ") + f"{r.tolerance:.2g}"
    built = [
        f"{_time(_finite(v))} {label}"
        for label, v in (("compile", res.compile_s if res else None), ("build", res.build_s if res else None))
        if _finite(v)
    ]
    if r.status == "measured" and r.kept:
        outcome = "kept" + (" (numerics change: see its error)" if r.changes_numerics else "")
        if "(paired with" in r.reason:
            outcome += " " + r.reason[r.reason.index("(paired with") :]
    elif r.status == "pending":
        outcome = "…"
    else:
        word = "refused" if r.status == "refused" else "dropped"
        outcome = f"{word}: {r.reason}" if r.reason else word
    median = _time(r.median) + "".join(f"\n+{b}" for b in built)  # compile and build apart from the step
    cumulative = "—" if r.cumulative is None else f"{r.cumulative:.3g}×"
    return [r.name, r.configuration, median, speed, cumulative, err, outcome]


def table_rows(ladder: Ladder) -> list[list[str]]:
    rows = [rung_cells(r) for r in ladder.rungs]
    if ladder.total is not None and ladder.total.result is not None:
        t = rung_cells(ladder.total)
        if ladder.total.status == "measured":
            t[-1] = "the winner against the baseline, side by side"
        rows.append(t)
    return rows
