"""A configuration and its baseline timed as interleaved pairs, for a speedup with an interval.

Both sides are planned, set up and warmed up in this process, then timed in ABBA blocks
(A B, then B A: a side that always ran second would inherit what the first left behind, a warm
cache or a busy allocator). Each pair's ratio is one estimate of the speedup; the result holds
the median of the ratios and a bootstrap interval (gpuplay.core.measure.stats.paired_speedup). The
samples of each side are its elements of the pairs, so the medians shown and the speedup come
from the same minutes of the machine's life.

One paired measurement gives both rows (`run_pair`): the candidate with its speedup, and the
baseline's own result (warmed up, checked against float64, its cold-allocation probe and page
faults as an unpaired run reports them), its conditions saying it was timed interleaved. The
budget of a paired run is each side's timed window: the pairs stop once one side (the slower) has
been timed for the budget, so that side is timed as long as an unpaired run (but for at least
MIN_PAIRS pairs; a µs step's sample is the mean of its element's steps), the other as many
(pairs are pairs), and the window lasts at most two budgets.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplay.core.backends.base import StepTimer
from gpuplay.core.backends.oom import describe_oom
from gpuplay.core.hw.nvidia import gpm_condition
from gpuplay.core.measure.stats import PairedSpeedup, paired_speedup
from gpuplay.core.process.interrupt import Interrupted, interruptible
from gpuplay.core.result import RunResult
from gpuplay.core.runner.alloc import FAULTS_NOTE_THRESHOLD, minor_faults
from gpuplay.core.runner.loop import Cancelled, PhaseCallback, SampleCallback
from gpuplay.core.runner.measure import _NONE, TelemetryWindow, _Measurement, _now, begin_window, run
from gpuplay.core.runner.plan import RunPlan, conditions, plan_run
from gpuplay.core.runtimes import Unavailable
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads.usercode_errors import UserCodeError

MIN_PAIRS = 8  # below this the bootstrap interval says little
# The candidate's own GPU window (after the pairs) lasts at least this: past NVML's 1-second
# power and utilisation averaging, so its figures are its own (telemetry._short_window).
OWN_GPU_WINDOW_S = 1.2
ELEMENT_S = 1e-3  # a pair's element repeats a µs step until it lasts about this long
MAX_INNER = 64


@dataclass
class PairedOutcome:
    baseline: list[float]  # per-step seconds of each element, in pair order
    candidate: list[float]
    cancelled: bool
    # Minor page faults during each side's elements (None where the platform counts none).
    faults_baseline: int | None = None
    faults_candidate: int | None = None


def inner_count(warmup: list[float]) -> int:
    """Steps per element: one for ms steps, more for µs steps (whose single timings are mostly
    timer and scheduler noise), from the warm-up's median."""
    if not warmup:
        return 1
    med = sorted(warmup)[len(warmup) // 2]
    if med <= 0:
        return MAX_INNER
    return max(1, min(MAX_INNER, math.ceil(ELEMENT_S / med)))


def interleave(
    a: Callable[[], Any],
    timer_a: StepTimer,
    inner_a: int,
    b: Callable[[], Any],
    timer_b: StepTimer,
    inner_b: int,
    *,
    pairs: int | None,
    budget_s: float | None,
    min_pairs: int,
    max_pairs: int,
    cancel: threading.Event,
    pause: threading.Event | None = None,
    on_sample: SampleCallback | None = None,
    between: Callable[[], Any] | None = None,
    between_b: Callable[[], Any] | None = None,
    faults: Callable[[], int | None] | None = None,
    failing: list[int] | None = None,
) -> PairedOutcome:
    """Time A and B in ABBA blocks until `pairs`, or `budget_s` and `min_pairs`, or a cancel.

    `budget_s` is each side's timed window: the wall time of its own elements (its steps and what
    runs between them, as an unpaired run's window counts them). The pairs stop once one side has
    had it, so that side is timed as long as an unpaired run (its samples: elements of `inner`
    steps), and the whole lasts at most about two budgets. As in the timed loop, each step's interval is the call and the release of its
    output; the bookkeeping runs between elements. `between` runs before each step of A, and of B
    too unless B has its own `between_b` (each side's cache flush). `faults` (a page-fault
    counter) is read around each element, outside its steps' intervals: each side's own count.
    A step that raises appends its side (0: A, 1: B) to `failing`: whose failure it is.
    """
    between_b = between_b or between
    times_a: list[float] = []
    times_b: list[float] = []
    spent = [0.0, 0.0]  # each side's window so far
    counted: list[int | None] = [0, 0]

    def element(side: int, fn: Callable[[], Any], timer: StepTimer, inner: int, bt: Any) -> float:
        f0 = faults() if faults is not None else None
        t0 = time.perf_counter()
        try:
            dt = _element(fn, timer, inner, bt)
        except Exception:
            if failing is not None:
                failing.append(side)
            raise
        spent[side] += time.perf_counter() - t0
        f1 = faults() if faults is not None else None
        before = counted[side]
        counted[side] = None if f0 is None or f1 is None or before is None else before + f1 - f0
        return dt

    def outcome(cancelled: bool) -> PairedOutcome:
        return PairedOutcome(times_a, times_b, cancelled, *(counted if faults is not None else (None, None)))

    while not _enough(len(times_a), pairs, min_pairs, max_pairs, budget_s, max(spent)):
        if cancel.is_set():
            return outcome(True)
        while pause is not None and pause.is_set() and not cancel.is_set():
            cancel.wait(0.05)
        if len(times_a) % 2 == 0:  # A then B ...
            ta = element(0, a, timer_a, inner_a, between)
            tb = element(1, b, timer_b, inner_b, between_b)
        else:  # ... then B then A: the block ABBA
            tb = element(1, b, timer_b, inner_b, between_b)
            ta = element(0, a, timer_a, inner_a, between)
        times_a.append(ta)
        times_b.append(tb)
        if on_sample is not None:
            on_sample("paired", tb)
    return outcome(False)


def _enough(
    n: int, pairs: int | None, min_pairs: int, max_pairs: int, budget_s: float | None, spent_s: float
) -> bool:
    """`n` pairs are enough: the count asked for, or (none asked) the minimum once one side has
    been timed for the budget (`spent_s`: the longer of the two sides' windows); never more than
    the maximum."""
    if n >= max_pairs:
        return True
    if pairs is not None:
        return n >= pairs
    return n >= min_pairs and (budget_s is None or spent_s >= budget_s)


def _element(fn: Callable[[], Any], timer: StepTimer, inner: int, between: Callable[[], Any] | None) -> float:
    """One element of a block: the mean of `inner` timed steps."""
    total = 0.0
    for _ in range(inner):
        if between is not None:  # a cold step's cache flush, the page return: outside the interval
            between()
        total += timer(fn)[0]
    return total / inner


def run_paired(
    spec: RunSpec,
    baseline: RunSpec,
    on_sample: SampleCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    telemetry: TelemetryWindow | None = None,
    probe_timeout: float | None = 30.0,
) -> RunResult:
    """Measure `spec` paired with `baseline`; the result of `spec`, its `speedup` filled in
    (`run_pair` gives the baseline's own result too)."""
    return run_pair(spec, baseline, on_sample, cancel, pause=pause, on_phase=on_phase,
                    telemetry=telemetry, probe_timeout=probe_timeout)[0]  # fmt: skip


def baseline_name(spec: RunSpec) -> str:
    """How a message names the side a candidate is paired with: NumPy on the CPU is "the NumPy
    baseline" (compare, run --baseline); any other (the best configuration so far of a tune
    ladder) is named by its configuration."""
    if spec.backend == "numpy" and spec.device == "cpu":
        return "the NumPy baseline"
    return f"the baseline ({spec.label()})"


def run_pair(
    spec: RunSpec,
    baseline: RunSpec,
    on_sample: SampleCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    telemetry: TelemetryWindow | None = None,
    probe_timeout: float | None = 30.0,
) -> tuple[RunResult, RunResult | None]:
    """Measure `spec` paired with `baseline`: the result of `spec` (its `speedup` filled in) and
    the baseline's own result from the same pairs, or None where the baseline has no finished
    measurement of its own (cancelled, or it never ran: the candidate failed first, or the
    baseline cannot be planned, which leaves a plain measurement of `spec` with a note saying why
    there is no speedup). A baseline refused by its preflight, or failing, is returned as such.
    """
    cancel = cancel or threading.Event()
    base_plan = plan_run(baseline, probe_timeout)
    if isinstance(base_plan, Refusal):
        result = run(spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry,
                     probe_timeout=probe_timeout)  # fmt: skip
        result.notes.append(f"no speedup: {baseline_name(baseline)} cannot run ({base_plan})")
        return result, None
    result = RunResult(spec=spec, started=_now())
    try:
        plan = plan_run(spec, probe_timeout)
    except UserCodeError as exc:
        result.status, result.failure, result.finished = "failed", "user-code", _now()
        result.message, result.detail = exc.summary, exc.detail
        return result, None
    if isinstance(plan, Refusal):
        result.status, result.message, result.finished = "refused", str(plan), _now()
        return result, None
    base_result = RunResult(spec=baseline, started=result.started)
    for p, r in ((plan, result), (base_plan, base_result)):
        r.notes.extend(p.notes)
        r.compute_dtype, r.size, r.flops, r.bytes = p.compute_dtype, p.size, p.flops, p.bytes
    paired = _Paired(plan, result, base_plan, base_result, cancel, pause, on_sample, on_phase, telemetry)
    paired.run()
    result.finished = base_result.finished = _now()
    return result, (base_result if paired.base_done else None)


class _Paired:
    def __init__(
        self,
        plan: RunPlan,
        result: RunResult,
        base_plan: RunPlan,
        base_result: RunResult,
        cancel: threading.Event,
        pause: threading.Event | None,
        on_sample: SampleCallback | None,
        on_phase: PhaseCallback | None,
        telemetry: TelemetryWindow | None,
    ) -> None:
        # Both sides' phases reach the caller; the baseline's names say whose they are.
        def base_phase(name: str, detail: str) -> None:
            if on_phase is not None:
                on_phase(f"baseline {name}", detail)

        self.cand = _Measurement(plan, result, cancel, pause, None, on_phase, None)
        self.base = _Measurement(base_plan, base_result, cancel, pause, None, base_phase, None)
        self.cancel, self.pause, self.on_sample, self.on_phase = cancel, pause, on_sample, on_phase
        self.telemetry = telemetry
        self.active = self.cand  # the side an exception belongs to
        self.base_done = False  # the baseline's result is a finished one (checked, refused, failed)
        self.outcome = PairedOutcome([], [], False)  # the pairs, once timed
        self.base_inner = 1  # steps per element of the baseline

    def run(self) -> None:
        cand, base = self.cand, self.base
        result = cand.result
        user_code = cand.plan.workload.user_code or base.plan.workload.user_code
        guard = interruptible(self.cancel) if user_code else contextlib.nullcontext()
        try:
            with contextlib.ExitStack() as stack:
                notes = stack.enter_context(cand.plan.backend.configured(cand.plan.spec))
                base_notes = stack.enter_context(base.plan.backend.configured(base.plan.spec))
                stack.enter_context(guard)
                result.conditions = conditions(cand.plan) | cand.plan.workload.provenance()
                base.result.conditions = conditions(base.plan) | base.plan.workload.provenance()
                timer = cand.plan.backend.step_timer(cand.plan.spec.device)
                base_timer = base.plan.backend.step_timer(base.plan.spec.device)
                if not cand.preflight(timer):
                    return
                self.active = base  # its estimate runs its step: a failure there is the baseline's
                base_ok = base.preflight(base_timer)
                self.active = cand
                if not base_ok:
                    self.base_done = True  # refused, as an unpaired run of it would be
                    result.notes.append(
                        f"no speedup: {baseline_name(base.plan.spec)} was refused ({base.result.message})"
                    )
                    step = cand.timed(cand.prepare(timer), timer)
                    self.check(cand, step)
                    return
                step = cand.prepare(timer)
                self.active = base
                base_step = base.prepare(base_timer)
                self.active = cand
                self.pairs(step, timer, base_step, base_timer)
                result.notes.extend(notes)
                base.result.notes.extend(base_notes)
                self.check(cand, step)
                self.active = base
                self.baseline_after(base_step, base_timer)
                self.check(base, base_step)
                self.base_done = True
                self.active = cand
                self.attach_speedup()
        except (Cancelled, Interrupted):
            result.status, result.message = "cancelled", "cancelled by the user"
        except Unavailable as exc:  # an inference runtime installed but broken: refused, with the fix
            result.status, result.message = "refused", str(exc)
        except UserCodeError as exc:
            result.status, result.failure = "failed", "user-code"
            result.message, result.detail = exc.summary, exc.detail
            if self.active is base:  # the user's step failed on NumPy: the baseline's own row says so
                result.message = f"{baseline_name(base.plan.spec)}: {exc.summary}"
                base.result.status, base.result.failure = "failed", "user-code"
                base.result.message, base.result.detail = exc.summary, exc.detail
                self.base_done = True
        except Exception as exc:
            self.failed(exc)
        finally:
            for m in (cand, base):
                with contextlib.suppress(Exception):
                    m.plan.backend.free_memory(m.plan.spec.device)

    def failed(self, exc: Exception) -> None:
        """The side that was running raised: out of memory, or an error, said on the result (and on
        the baseline's own row when it was the baseline's)."""
        cand, base, result = self.cand, self.base, self.cand.result
        result.status = "failed"
        failing = self.active
        if failing.plan.backend.is_out_of_memory(exc):
            result.failure = "out-of-memory"
            result.message = describe_oom(failing.plan.backend, failing.plan.spec.device, result.size, exc)
        else:
            result.failure = result.failure or "error"
            who = "" if failing is cand else f"{baseline_name(base.plan.spec)}: "
            result.message = f"{who}{type(exc).__name__}: {str(exc).strip()[:300]}"
        if failing is base:  # the baseline's own row says it failed, as an unpaired run of it would
            base.result.status, base.result.failure = "failed", result.failure
            base.result.message = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
            self.base_done = True

    def pairs(
        self, step: Callable[[], Any], timer: StepTimer, base_step: Callable[[], Any], base_timer: StepTimer
    ) -> None:
        cand, base, spec = self.cand, self.base, self.cand.plan.spec
        if self.on_phase is not None:
            self.on_phase("paired", "")
        own = (*cand.own_pids, *base.own_pids)  # a loader's workers are the run's own CPU
        token = begin_window(self.telemetry, spec.device, own)
        # The run's own peak device memory over the paired phase, as an unpaired run counts it
        # over its timed one (the NumPy baseline holds host memory only).
        with contextlib.suppress(Exception):
            cand.plan.backend.reset_peak_memory(spec.device)
        faults0 = minor_faults()
        self.base_inner = inner_count(base.result.warmup)
        failing: list[int] = []  # a step that raises in the pairs: whose side (0: the baseline)
        try:
            outcome = interleave(
                base_step,
                base_timer,
                self.base_inner,
                step,
                timer,
                inner_count(cand.result.warmup),
                pairs=spec.repeat,
                budget_s=spec.budget_s,
                min_pairs=max(MIN_PAIRS, spec.min_repeat),
                max_pairs=spec.max_repeat,
                cancel=self.cancel,
                pause=self.pause,
                on_sample=self.on_sample,
                # Each side as its own measurement times it: a cold run's flush (then an idle
                # device) before each of its steps, as in its warm-up and in an unpaired run.
                between=base.between(),
                between_b=cand.between(),
                faults=minor_faults,
                failing=failing,
            )
        except BaseException:
            if failing == [0]:  # NumPy's step raised (a host OOM, a user's step on a later call)
                self.active = base
            # A step that raises mid-window still closes it, as an unpaired run's does: the window
            # holds an NVML GPM sample buffer and a sampling thread a long-lived engine would leak.
            if self.telemetry is not None:
                with contextlib.suppress(Exception):
                    self.telemetry.end(token)
            raise
        faults1 = minor_faults()
        cand.peak_memory()
        if self.telemetry is not None:
            cand.result.telemetry = self.telemetry.end(token)
            if spec.device != "cpu" and not outcome.cancelled:
                self.own_gpu_window(step, timer, outcome)
        self.allocation_note(faults0, faults1, len(outcome.candidate))
        cand.result.samples, base.result.samples = outcome.candidate, outcome.baseline
        cand.result.conditions["paired_with"] = base.plan.spec.label()
        cand.result.conditions["alloc"] = spec.alloc
        self.outcome = outcome
        if outcome.cancelled:
            raise Cancelled
        cand.energy(step)

    def own_gpu_window(self, step: Callable[[], Any], timer: StepTimer, outcome: PairedOutcome) -> None:
        """The device's figures (utilisation, power, energy, GPM activity, its noise) over the
        candidate's steps alone, after the pairs: over the pairs' window they would count the
        NumPy side's time, the device idle meanwhile, as the candidate's. Its steps run as in the
        pairs (each side's flush before each step, the step's output dropped) for as long as the
        candidate was timed there, at least OWN_GPU_WINDOW_S; the result says which window it is."""
        cand, telemetry = self.cand, self.telemetry
        r, spec = cand.result, cand.plan.spec
        if telemetry is None or not r.telemetry or r.telemetry.get("gpu") is None:
            return  # no device figures in the pairs' window either: nothing to attribute
        inner = inner_count(r.warmup)
        own_s = sum(outcome.candidate) * inner
        target_s = max(OWN_GPU_WINDOW_S, min(own_s, spec.budget_s if spec.budget_s else own_s))
        if self.on_phase is not None:
            self.on_phase("gpu window", "")
        between = cand.between()
        token = begin_window(telemetry, spec.device, cand.own_pids)
        flushes0 = (cand.flushes, cand.flush_s)
        steps = 0
        t0 = time.perf_counter()
        try:
            while (time.perf_counter() - t0 < target_s or steps == 0) and not self.cancel.is_set():
                if between is not None:
                    between()
                timer(step)
                steps += 1
        finally:
            window = telemetry.end(token)
        if self.cancel.is_set():
            return
        cand.without_flushes(window, (cand.flushes - flushes0[0], cand.flush_s - flushes0[1]), telemetry)
        if window.get("gpu_flush"):
            r.telemetry["gpu_flush"] = window["gpu_flush"]
        seconds = window.get("duration_s") or (time.perf_counter() - t0)
        r.telemetry["gpu"] = gpu = window.get("gpu")
        if "gpu_note" in window:
            r.telemetry["gpu_note"] = window["gpu_note"]
        r.telemetry.setdefault("noise", {})["gpu"] = (window.get("noise") or {}).get("gpu")
        where = f"its own {steps} steps after the pairs ({seconds:.2f} s)"
        r.telemetry["gpu_window"] = where
        r.telemetry["gpu_window_why"] = (
            "the pairs' window holds the NumPy side's steps too, with this device idle: "
            "device figures over it would be diluted"
        )
        if gpu and gpu.get("energy_j") is not None:
            gpu["energy_per_step_j"] = gpu["energy_j"] / steps
        if gpu and gpu.get("activity"):
            r.conditions["gpu_activity"] = gpm_condition(gpu["activity"], where)

    def baseline_after(self, step: Callable[[], Any], timer: StepTimer) -> None:
        """What an unpaired run of the baseline reports after its timed phase, for its own row:
        its page faults per step, the cold-allocation probe, the workload's notes; and that its
        steps were timed interleaved with the candidate's."""
        base, outcome = self.base, self.outcome
        r, n = base.result, len(outcome.baseline)
        r.conditions["paired_with"] = self.cand.plan.spec.label()
        spec = self.cand.plan.spec
        least = max(MIN_PAIRS, spec.min_repeat)
        if spec.repeat is not None:
            until = f"{spec.repeat} pairs asked"
        elif n >= spec.max_repeat:
            until = f"the pairs stopped at their maximum of {spec.max_repeat}"
        elif n <= least:  # the budget was spent before: the least the interval needs held them
            until = (
                f"the pairs stopped at the minimum of {least} pairs, one side timed past the budget by then"
            )
        else:
            until = "the pairs stopped once one side had been timed for the budget"
        r.conditions["timed"] = (
            f"interleaved: {n} ABBA pairs with {spec.label()} (each sample the mean of "
            f"{self.base_inner} step{'s' if self.base_inner > 1 else ''}); the same pairs give its speedup; {until}"
        )
        base.peak_memory()
        window = self.cand.result.telemetry
        if window:  # the host's side of the pairs' window is this row's too: its noise check
            r.telemetry = {k: window[k] for k in ("duration_s", "host_cpu_mean_percent", "process_rss_bytes")
                           if k in window}  # fmt: skip
            r.telemetry["noise"] = {"host": (window.get("noise") or {}).get("host"), "gpu": None}
            r.telemetry["gpu"], r.telemetry["gpu_note"] = None, "run on the CPU"
        if outcome.faults_baseline is not None and n:
            per_step = round(outcome.faults_baseline / (n * self.base_inner), 1)
            r.conditions["page_faults_per_step"] = per_step
            base.allocation(step, timer, per_step, switch=False)  # the pairs keep their own samples
        else:
            r.conditions["alloc"] = base.plan.spec.alloc
        r.notes.extend(base.plan.workload.after_run(step, base.plan.backend.name, base.plan.spec.device,
                                                    base.plan.params))  # fmt: skip

    def allocation_note(self, faults0: int | None, faults1: int | None, pairs: int) -> None:
        """Alternating two libraries' large temporaries can make glibc return pages between
        them: both sides then run in the cold allocation mode, which a script timing one side
        alone may not. Said beside the speedup when the pairs faulted heavily."""
        if faults0 is None or faults1 is None or not pairs:
            return
        per_pair = round((faults1 - faults0) / pairs, 1)
        result = self.cand.result
        result.conditions["page_faults_per_pair"] = per_pair
        if per_pair >= FAULTS_NOTE_THRESHOLD and self.cand.plan.spec.alloc != "cold":
            result.notes.append(
                f"allocation-bound pairs: {per_pair:,.0f} page faults per pair; alternating with NumPy "
                "returned pages to the OS, so the speedup is for the cold allocation mode"
            )

    def check(self, m: _Measurement, step: Callable[[], Any]) -> None:
        """One more call of the very step that was timed (or the cold probe's last call of it), against
        the float64 reference."""
        if m.plan.spec.check:
            self.cand.phase("check")
            # The baseline's cold-allocation probe kept its last output, as an unpaired run's does.
            out, m.probe_out = m.probe_out, _NONE
            m.check(step() if out is _NONE else out)

    def attach_speedup(self) -> None:
        cand, base = self.cand.result, self.base.result
        paired = paired_speedup(base.samples, cand.samples, seed=self.cand.plan.spec.seed)
        if paired is None:
            return
        cand.speedup = speedup_record(paired, base, cand)


def speedup_record(paired: PairedSpeedup, base: RunResult, cand: RunResult | None = None) -> dict[str, Any]:
    """What a result keeps of its pairing: the speedup, the baseline it was measured with, and
    both sides' medians over these very pairs (a panel showing the speedup shows those)."""
    threads = (base.conditions.get("threads") or {}).get("numpy_blas")
    return {
        **paired.to_dict(),
        "baseline": base.spec.label(),
        "baseline_dtype": base.spec.dtype,
        "baseline_median_s": base.median,
        "candidate_median_s": cand.median if cand is not None else None,
        "baseline_threads": threads,
        "baseline_check_ok": base.check_ok,
    }
