"""Run one measurement: plan, preflight, set up, compile, warm up, time, check.

`run()` is plain code driven by callbacks and a `threading.Event`: the engine,
the CLI and the tests call it directly, and all see the same phases.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Protocol

import numpy as np

from gpuplay.core.backends.base import StepTimer
from gpuplay.core.backends.compile_watch import CompileFindings, after_first_call, during_timing
from gpuplay.core.backends.oom import describe_oom
from gpuplay.core.hw.nvidia import gpm_condition
from gpuplay.core.measure import trace
from gpuplay.core.process.interrupt import Interrupted, interruptible
from gpuplay.core.result import RunResult
from gpuplay.core.runner.alloc import (
    FRESH_VOTES,
    allocation_bound,
    allocation_note,
    between_steps,
    cold_probe,
    fresh_majority,
    fresh_mode,
    fresh_spread,
    headline_note,
    headline_words,
    loop_median,
    met_both_modes,
    middle_loop,
    modes_differ,
    modes_far_apart,
    other_mode,
    unsettled,
)
from gpuplay.core.runner.alloc import minor_faults as _minor_faults
from gpuplay.core.runner.inputs import clear_caches, reference
from gpuplay.core.runner.loop import Cancelled, LoopOutcome, PhaseCallback, SampleCallback, timed_loop
from gpuplay.core.runner.plainloop import plain_loop
from gpuplay.core.runner.plan import RunPlan, conditions, plan_run
from gpuplay.core.runner.preflight import estimate_step_seconds, memory_shortfall
from gpuplay.core.runner.steps import prepare_step
from gpuplay.core.runtimes import Unavailable
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import relative_error
from gpuplay.core.workloads.base import SetupReport
from gpuplay.core.workloads.usercode_errors import UserCodeError

# A step moving this much host memory may be served by mmap and fault its output in: the
# cold allocation mode is probed beside the warm one (runner/alloc.py).
ALLOC_PROBE_MIN_BYTES = 4 << 20
ALLOC_PROBE_MAX_STEP_S = 0.25
# torch.compile modes whose code inductor runs through CUDA graphs (cudagraph trees,
# torch/_inductor/cudagraph_trees.py): the compiling call runs the graph eagerly as its warm-up,
# the next call records the CUDA graph, later ones replay it (a failed invariant re-records). The
# compiling call is timed apart; with warm-up 0 the recording was the first sample. Three warm-up
# calls keep it, and a re-record, out of the samples.
CUDA_GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")
CUDA_GRAPH_WARMUP = 3


class TelemetryWindow(Protocol):
    """What the runner needs from a telemetry sampler: bracket the timed phase."""

    def begin(self, device: str, own_pids: Collection[int] = ()) -> Any: ...

    def end(self, token: Any) -> dict[str, Any]: ...


def begin_window(telemetry: TelemetryWindow | None, device: str, own_pids: Collection[int]) -> Any:
    """telemetry.begin, naming the run's own processes only when there are some: a window written
    before `own_pids` existed (`begin(self, device)`) still brackets every run that starts none."""
    if telemetry is None:
        return None
    return telemetry.begin(device, own_pids=own_pids) if own_pids else telemetry.begin(device)


_NONE: Any = object()  # no output kept (a step's output may itself be None)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def run(
    spec: RunSpec,
    on_sample: SampleCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    telemetry: TelemetryWindow | None = None,
    probe_timeout: float | None = 30.0,
) -> RunResult:
    """Measure `spec`. Never raises for a failure a user can cause: the result says what happened."""
    result = RunResult(spec=spec, started=_now())
    trace.mark("planning the run")
    try:
        plan = plan_run(spec, probe_timeout)
    except UserCodeError as exc:  # a user's flops() or bytes() raised
        result.status, result.failure, result.finished = "failed", "user-code", _now()
        result.message, result.detail = exc.summary, exc.detail
        return result
    if isinstance(plan, Refusal):
        result.status, result.message, result.finished = "refused", str(plan), _now()
        return result
    result.notes.extend(plan.notes)
    result.compute_dtype = plan.compute_dtype
    result.size, result.flops, result.bytes = plan.size, plan.flops, plan.bytes
    _Measurement(plan, result, cancel or threading.Event(), pause, on_sample, on_phase, telemetry).run()
    result.finished = _now()
    trace.mark("measured")
    return result


class _Measurement:
    """The phases of one planned run, filling in `result` as they go."""

    def __init__(
        self,
        plan: RunPlan,
        result: RunResult,
        cancel: threading.Event,
        pause: threading.Event | None,
        on_sample: SampleCallback | None,
        on_phase: PhaseCallback | None,
        telemetry: TelemetryWindow | None,
    ) -> None:
        self.plan, self.result, self.cancel, self.pause = plan, result, cancel, pause
        self.on_sample, self.on_phase, self.telemetry = on_sample, on_phase, telemetry
        self.flush: Any = None  # the cold-cache flusher (prepare sets it)
        self.compiled_mark: Any = None  # dynamo's counters after the compile (prepare sets it)
        self.split: Any = None  # phases the step times itself (a data loader's wait, copy, model)
        self.own_pids: tuple[int, ...] = ()  # processes the workload started for the run
        # The cold-allocation probe's last output, a call of the very step that was timed: the
        # check reads it rather than calling the step once more (one step less per run).
        self.probe_out: Any = _NONE
        self.flushes = 0  # cold-cache flushes run so far (the telemetry takes the timed window's out)
        self.flush_s = 0.0  # and the host's seconds spent in them (the flush and its sync)

    def phase(self, name: str, detail: str = "") -> None:
        trace.mark(f"phase {name}")
        if self.on_phase is not None:
            self.on_phase(name, detail)

    def run(self) -> None:
        plan, result = self.plan, self.result
        backend, device = plan.backend, plan.spec.device
        # A user's step may loop forever without looking at `cancel`: interrupt its Python instead.
        guard = interruptible(self.cancel) if plan.workload.user_code else contextlib.nullcontext()
        try:
            with backend.configured(plan.spec) as notes, guard:
                result.conditions = conditions(plan) | plan.workload.provenance()
                timer = backend.step_timer(device)
                if self.preflight(timer):
                    step = self.measure(timer)
                    result.notes.extend(notes)
                    if plan.spec.check:
                        self.phase("check")
                        out, self.probe_out = self.probe_out, _NONE
                        if out is _NONE:
                            out = step()  # one more call of the very step that was timed
                        # Its copies to host buffers may still be in flight (non_blocking d2h).
                        backend.synchronize(device)
                        self.check(out)
                        trace.mark("checked")
        except (Cancelled, Interrupted):
            result.status, result.message = "cancelled", "cancelled by the user"
        except Unavailable as exc:  # an inference runtime installed but broken: refused, with the fix
            result.status, result.message = "refused", str(exc)
        except UserCodeError as exc:
            result.status, result.failure = "failed", "user-code"
            result.message, result.detail = exc.summary, exc.detail
        except Exception as exc:
            result.status = "failed"
            if backend.is_out_of_memory(exc):
                result.failure = "out-of-memory"
                clear_caches()
                result.message = describe_oom(backend, device, result.size, exc)
            else:
                result.failure = result.failure or "error"
                result.message = f"{type(exc).__name__}: {_first_line(exc)}"
        finally:
            with contextlib.suppress(Exception):
                backend.free_memory(device)

    def preflight(self, timer: StepTimer) -> bool:
        """Refuse what cannot fit or would take too long; True to go on."""
        plan, result, spec = self.plan, self.result, self.plan.spec
        shortfall = memory_shortfall(plan)
        if shortfall:
            result.status, result.failure, result.message = "refused", "out-of-memory", shortfall
            return False
        self.phase("estimate")
        est = estimate_step_seconds(plan, timer, spec.max_step_s, self.cancel)
        result.estimate_s = est
        if est > spec.max_step_s:
            result.status = "refused"
            result.message = (
                f"one step is estimated {_over_limit(est, spec.max_step_s)} for "
                f"{spec.label()} at {plan.size}; choose a smaller size or raise the step limit"
            )
            return False
        return True

    def measure(self, timer: StepTimer) -> Callable[[], Any]:
        """Set up, compile, warm up and time; the step that was timed."""
        step = self.prepare(timer)
        return self.timed(step, timer)

    def prepare(self, timer: StepTimer) -> Callable[[], Any]:
        """Set up, compile and warm up; the step ready to be timed (paired runs time it apart)."""
        prepared = prepare_step(
            self.plan,
            lambda step: self.warm_up(step, timer),
            first_call=lambda step, eager: self.compile(step, timer, eager),
            on_phase=self.phase,
        )
        self.result.setup_s = prepared.setup_s
        self.take_report(prepared.report)
        return prepared.step

    def take_report(self, report: SetupReport | None) -> None:
        """What the workload's set-up built (a runtime's export, a loader) into the result."""
        if report is None:
            return
        result = self.result
        result.build_s = report.build_s
        result.conditions.update(report.conditions)
        result.notes.extend(report.notes)
        self.split = report.split
        self.own_pids = report.own_pids  # a loader's workers: the noise check counts them as the run's

    def warm_up(self, step: Callable[[], Any], timer: StepTimer) -> None:
        """The warm-up loop, after the compile's counters are marked and the cache flusher is made."""
        result, spec, backend = self.result, self.plan.spec, self.plan.backend
        compiled = spec.compile != "off" and result.conditions.get("compile") == spec.compile
        self.compiled_mark = backend.compile_counts() if compiled else None
        # Cold cache: a buffer larger than the last-level cache is written between steps,
        # outside the timed interval (triton's do_bench does the same with 256 MB on a GPU).
        self.flush = flush = backend.cache_flusher(spec.device) if spec.cache == "cold" else None
        if flush is not None:
            result.conditions["cache"] = f"cold: {flush.describe()} between steps, outside the timing"
        elif spec.cache == "cold":
            result.conditions["cache"] = f"warm: no cache flush on {spec.device}"
            result.notes.append(f"cold cache asked, but {spec.device} has no flush: timed warm")
        # No output outlives its step (the loop keeps none): a user's timing holds one
        # output at a time, and a second one, alive through the timed loop, changed the
        # allocator's state (fft2d's two modes).
        warm = self.loop(step, timer, "warmup", count=self.warmup_count())
        result.warmup = warm.samples
        if warm.cancelled:
            raise Cancelled

    def warmup_count(self) -> int:
        """The warm-up steps asked for, raised where a compile mode records a CUDA graph."""
        spec, result = self.plan.spec, self.result
        graphs = (
            spec.compile in CUDA_GRAPH_COMPILE_MODES
            and spec.device.startswith("cuda")
            and result.conditions.get("compile") == spec.compile  # not fallen back to eager
        )
        if not graphs:
            return spec.warmup
        count = max(spec.warmup, CUDA_GRAPH_WARMUP)
        result.conditions["warmup"] = count
        result.conditions["cuda_graph_recording"] = (
            f"kept out of the timed steps: {count} warm-up steps after the compile "
            f"({spec.compile} records its CUDA graph on an early call"
            + (f"; {spec.warmup} asked" if count != spec.warmup else "")
            + ")"
        )
        return count

    def timed(self, step: Callable[[], Any], timer: StepTimer) -> Callable[[], Any]:
        """The timed phase: samples, telemetry and page faults into the result; the step."""
        plan, result, spec, backend = self.plan, self.result, self.plan.spec, self.plan.backend
        self.phase("timed")
        timed_mark = backend.compile_counts() if self.compiled_mark is not None else None
        telemetry = self.telemetry
        with contextlib.suppress(Exception):  # no count on this device: no figure, never a failure
            backend.reset_peak_memory(spec.device)
        token = begin_window(telemetry, spec.device, self.own_pids)
        trace.mark("telemetry window opened")
        flushes0 = (self.flushes, self.flush_s)
        faults0 = _minor_faults()
        if self.split is not None:
            self.split.reset()  # the warm-up's phases are not the timed steps'
        timed = self.timed_loop(step, timer, token)
        faults1 = _minor_faults()
        trace.mark("timed loop done")
        if self.split is not None:
            result.split = self.split.take()
        self.peak_memory()
        if telemetry is not None:
            result.telemetry = telemetry.end(token)
            trace.mark("telemetry window closed")
            if not timed.cancelled:
                self.without_flushes(
                    result.telemetry, (self.flushes - flushes0[0], self.flush_s - flushes0[1])
                )
            gpu = result.telemetry.get("gpu")
            if gpu and gpu.get("energy_j") is not None and timed.samples:
                gpu["energy_per_step_j"] = gpu["energy_j"] / len(timed.samples)
            if gpu and gpu.get("activity"):  # GPM over the timed steps: the figures, or why none
                result.conditions["gpu_activity"] = gpm_condition(gpu["activity"])
        result.samples = timed.samples
        if timed.cancelled:
            raise Cancelled
        if faults0 is not None and faults1 is not None and timed.samples:
            per_step = round((faults1 - faults0) / len(timed.samples), 1)
            result.conditions["page_faults_per_step"] = per_step
            self.allocation(step, timer, per_step)
        if self.compiled_mark is not None:
            self.compile_findings(during_timing(self.compiled_mark, timed_mark, backend.compile_counts()))
        self.energy(step)
        result.notes.extend(plan.workload.after_run(step, backend.name, spec.device, plan.params))
        return step

    def timed_loop(self, step: Callable[[], Any], timer: StepTimer, token: Any) -> Any:
        """The timed steps inside the telemetry window opened with `token`."""
        spec = self.plan.spec
        try:
            return self.loop(
                step,
                timer,
                "timed",
                count=spec.repeat,
                budget_s=spec.budget_s,
                min_count=spec.min_repeat,
                max_count=spec.max_repeat,
            )
        except BaseException:
            # A step that raises mid-window (user code, OOM) still closes it: the window holds an
            # NVML GPM sample buffer and a sampling thread, which a long-lived engine would leak.
            if self.telemetry is not None:
                with contextlib.suppress(Exception):
                    self.telemetry.end(token)
            raise

    def peak_memory(self) -> None:
        """The run's own peak device memory over the timed phase, where the library counts it."""
        spec, backend = self.plan.spec, self.plan.backend
        peak = None
        with contextlib.suppress(Exception):
            peak = backend.peak_memory(spec.device)
        if peak is None:
            return
        count, source = None if peak[0] is None else int(peak[0]), peak[1]
        if count is not None and self.flush is not None and spec.device != "cpu":
            # The flush buffer is allocated before the count starts and held through the timed
            # phase: it is in every reading of it, and none of it is the step's.
            count = max(0, count - int(self.flush.nbytes))
            source += f"; the {self.flush.nbytes / 2**20:.0f} MiB cold-cache flush buffer not counted"
        self.result.peak_memory = {"bytes": count, "source": source}

    def energy(self, step: Callable[[], Any]) -> None:
        """Energy per step over its own window after the timed one (gpuplay.core.measure.energy)."""
        spec, backend = self.plan.spec, self.plan.backend
        if not spec.energy:
            return
        from gpuplay.core.measure.energy import energy_for

        e = energy_for(spec.device, step, self.plan.flops, lambda: backend.synchronize(spec.device),
                       self.cancel.is_set, on_start=self.energy_starts)  # fmt: skip
        self.result.telemetry["energy"] = e.to_dict()

    def compile(
        self, step: Callable[[], Any], timer: StepTimer, eager: Callable[[], Callable[[], Any]]
    ) -> Callable[[], Any]:
        """Time the first (compiling) call apart; on a compiler error, fall back to eager."""
        plan, result = self.plan, self.result
        try:
            before = plan.backend.compile_counts()
            result.compile_s = timer(step)[0]  # its output is dropped at once
            if self.on_sample:
                self.on_sample("compile", result.compile_s)
            if before is not None and self.compile_findings(
                after_first_call(before, plan.backend.compile_counts())
            ):
                return eager()
            return step
        except Exception as exc:
            if plan.backend.is_out_of_memory(exc):
                raise
            result.failure = "compile"
            result.notes.append(
                f"torch.compile failed ({type(exc).__name__}: {_first_line(exc)}); this is an EAGER run"
            )
            result.conditions["compile"] = f"failed: ran eager ({plan.spec.compile} requested)"
            return eager()

    def compile_findings(self, found: CompileFindings) -> bool:
        """Report what dynamo's counters show; True when the step fell back to eager."""
        result, requested = self.result, self.plan.spec.compile
        result.notes.extend(found.notes)
        if found.graph_breaks:
            result.conditions["compile_graph_breaks"] = found.graph_breaks
        if found.recompiles:
            result.conditions["compile_recompiles"] = found.recompiles
        if not found.fallback:
            return False
        # Timed as what it is: eager, said so beside the figure, never labelled compiled.
        result.failure = "compile"
        result.conditions["compile"] = f"fell back to eager ({requested} requested)"
        result.notes.append(f"torch.compile fell back: {found.fallback}; this is an EAGER run")
        return True

    def allocation(
        self, step: Callable[[], Any], timer: StepTimer, faults_per_step: float, switch: bool = True
    ) -> None:
        """Say which allocation mode was timed, and (on the host) how far the other one is.

        With `alloc=auto`, where the modes differ or the steps fault enough themselves, a fresh
        process's plain loop times the steps as a user's own script does (runner/plainloop.py);
        where its median step faults unlike the engine's, its times are the headline and the
        engine's loop is kept beside them by name (`switch=False`: a paired baseline keeps the
        pairs' samples and only says so)."""
        plan, result = self.plan, self.result
        mode = plan.spec.alloc
        result.conditions["alloc"] = "warm" if mode == "auto" else mode
        probe = None
        median = result.median or 0.0
        if (
            mode != "cold"
            and plan.spec.device == "cpu"
            and plan.bytes >= ALLOC_PROBE_MIN_BYTES
            and 0 < median <= ALLOC_PROBE_MAX_STEP_S
        ):
            self.phase("allocation")
            probe = cold_probe(step, timer, median, keep_last=self.keep_for_check)
            if probe is not None:
                result.conditions["alloc_cold_probe"] = probe
        if (
            mode == "auto"
            and probe is not None
            and (modes_differ(probe, faults_per_step, median) or allocation_bound(faults_per_step, median))
        ):
            self.headline_mode(probe, faults_per_step, switch)
            return
        note = allocation_note(mode, faults_per_step, probe)
        if note:
            result.notes.append(note)

    def headline_mode(self, probe: dict[str, Any], faults: float, switch: bool) -> None:
        """A fresh process's plain loop: its times the headline where its steps fault unlike the
        engine's (or where fresh loops disagree among themselves: the middle one's), the engine's
        loop beside them by name; otherwise the engine's loop, the cold probe beside it where the
        modes differ."""
        result, median = self.result, self.result.median or 0.0
        far_probe = probe if modes_far_apart(probe) else None
        loops, spread = self.fresh_loops(faults, median, switch, allocation_bound(faults, median), far_probe)
        fresh, plain, agree = fresh_majority(loops)
        if spread is not None and switch:
            plain, fresh = middle_loop(loops)
            result.conditions["alloc_fresh_spread"] = spread
        if plain is not None:
            result.conditions["alloc_plain_loop"] = {k: v for k, v in plain.items() if k != "samples_s"}
        if len(loops) > 1:
            result.conditions["alloc_fresh_loops"] = [
                {
                    "mode": m,
                    "faults_per_step": p["faults_per_step"] if p else None,
                    "median_s": loop_median(p) if p else None,
                }
                for p, m in loops
            ]
        if plain is not None and switch and (spread is not None or fresh in ("cold", "warm")):
            engine_samples, result.samples = result.samples, plain["samples_s"]
            result.conditions["alloc_timed_in"] = "a fresh process's plain loop"
            result.conditions["page_faults_per_step"] = plain["faults_per_step"]
            if fresh in ("cold", "warm"):  # the engine's loop beside it, by the mode it was in
                result.conditions["alloc"] = fresh
                result.conditions["alloc_other"] = other_mode(
                    "warm" if fresh == "cold" else "cold", engine_samples, faults
                )
        elif modes_differ(probe, faults, median):
            result.conditions["alloc_other"] = other_mode("cold", None, probe["cold_faults_per_step"],
                                                          probe["cold_median_s"], probe["steps"])  # fmt: skip
        result.conditions["alloc_headline"] = headline_words(
            fresh, plain, faults, switch, (agree, len(loops)), spread if switch else None
        )
        result.notes.append(headline_note(result.conditions))

    def fresh_loops(
        self, faults: float, median: float, switch: bool, bound: bool, far_probe: dict[str, Any] | None
    ) -> tuple[list[tuple[dict[str, Any] | None, str | None]], dict[str, Any] | None]:
        """Fresh processes' plain loops, each with its mode beside the engine's, and their range
        where they disagree. A loop that would replace the engine's is asked again (FRESH_VOTES at
        most): a fresh process is not always in one mode (fft2d torch 1024²: 2 of 8 fresh loops
        stayed in the pages-returned mode for all their steps, the others for 1-3 steps). Two that
        agree on the mode but not on the figure (SPREAD_RATIO) are not enough: a third decides.
        `bound`: the engine's own steps fault enough to matter (allocation-bound); `far_probe`:
        the cold probe, where the two modes' figures are FLIP_RATIO or more apart: a first loop
        that settled in the engine's mode after a step in the other was one draw, and a second
        says whether fresh processes agree on it."""
        spec = self.plan.spec
        # The run's own budget (at least 10 steps): the headline loop is as long as the engine's was.
        budget = spec.budget_s if spec.repeat is None else 1e9
        loops: list[tuple[dict[str, Any] | None, str | None]] = []
        while True:
            plain = plain_loop(spec, budget, self.cancel, max_steps=spec.repeat or spec.max_repeat)
            if self.cancel.is_set():
                raise Cancelled
            loops.append((plain, fresh_mode(plain, faults, median)))
            agree = fresh_majority(loops)[2]
            spread = fresh_spread(loops)
            if not switch or len(loops) >= FRESH_VOTES:
                return loops, spread
            if spread is not None:
                continue
            # A step that faults inside itself meets its process's heap state: where the first
            # fresh loop's faults moved from step to step (heat torch 512²: median 1,984 a step,
            # mean 5,835), a second says whether processes agree even though the first faulted
            # like the engine. A steady count (matmul NumPy 1024², ~1,000 every step) asks none.
            # Where the modes' figures are far apart and the first loop met both, its mode is one
            # draw: a second.
            first = loops[0][0]
            drawn = far_probe is not None and met_both_modes(first, far_probe, faults)
            if loops[0][1] not in ("cold", "warm") and not (
                len(loops) < 2 and (drawn or (bound and unsettled(first)))
            ):
                return loops, spread
            if agree >= 2:
                return loops, spread

    def keep_for_check(self, out: Any) -> None:
        """Keep a probe step's output for the check (`energy` drops it if it calls the step again)."""
        if self.plan.spec.check:
            self.probe_out = out

    def energy_starts(self) -> None:
        self.probe_out = _NONE  # steps run in the energy window: the check calls its own, as before
        self.phase("energy")

    def loop(self, step: Callable[[], Any], timer: StepTimer, phase: str, **kw: Any) -> LoopOutcome:
        return timed_loop(
            step, timer, phase=phase, cancel=self.cancel, pause=self.pause, on_sample=self.on_sample,
            between=self.between(), **kw,
        )  # fmt: skip

    def between(self) -> Callable[[], Any] | None:
        """What runs between steps, outside the interval: the cache flush, the page return."""
        flush, spec = self.flush, self.plan.spec
        if flush is not None and spec.device != "cpu":
            flush = self.device_flush()
        return both(flush, between_steps(spec.alloc))

    def device_flush(self) -> Callable[[], Any]:
        """The cold-cache flush of a device run, then an idle device; each call counted."""
        flush_only, device, backend = self.flush, self.plan.spec.device, self.plan.backend

        def flush_then_idle() -> None:
            # The flush is queued on the device: waiting for it makes a cold step start as a
            # warm one does, on an idle device, so both count the step's host dispatch.
            # Otherwise the dispatch hides behind the flush and a launch-bound cold step
            # reads faster than the warm one (docs/engine.md, "What a GPU step's time is").
            t0 = time.perf_counter()
            flush_only()
            backend.synchronize(device)
            self.flush_s += time.perf_counter() - t0
            self.flushes += 1

        return flush_then_idle

    def without_flushes(
        self, window: dict[str, Any], flushes: tuple[int, float], telemetry: TelemetryWindow | None = None
    ) -> None:
        """Take the cold-cache flushes out of a telemetry window's device figures (core/runner/
        coldflush.py), from a window of flushes alone measured now; its notes say so."""
        gpu, telemetry = window.get("gpu"), telemetry or self.telemetry
        if (
            not gpu
            or telemetry is None
            or flushes[0] <= 0
            or self.flush is None
            or self.plan.spec.device == "cpu"
        ):
            return
        from gpuplay.core.runner.coldflush import flush_window, without_flushes

        self.phase("flush window")
        alone = flush_window(telemetry, self.plan.spec.device, self.device_flush(), self.own_pids,
                             self.cancel.is_set)  # fmt: skip
        if alone is None:
            return
        flush_tele, n = alone
        flush_gpu = flush_tele.get("gpu") or {}
        seconds = float(window.get("duration_s") or 0.0)
        done = without_flushes(
            gpu, seconds, flushes, flush_gpu, float(flush_tele.get("duration_s") or 0.0), n
        )
        if done:
            window["gpu_flush"] = done

    def check(self, out: Any) -> None:
        """Compare the last output with the float64 reference."""
        plan, result = self.plan, self.result
        w, p = plan.workload, plan.params
        w.validate_output(out)
        got = w.checked(host_widened(plan.backend, out), p)
        del out
        result.error = relative_error(got, reference(w, p, plan.spec.seed))
        result.tolerance = float(w.tolerance(tolerance_dtype(plan), p))
        if not np.isfinite(result.error):
            result.failure = "not-finite"
            result.notes.append(
                f"the result holds NaN or inf ({plan.compute_dtype} overflowed or lost range)"
            )


def host_widened(backend: Any, out: Any) -> Any:
    """The output on the host, widened to float64 there: widening on the device first would
    double a large result's footprint on the device and can run out of memory after the
    timed run is done."""
    return backend.to_host(backend.download(out))


def tolerance_dtype(plan: RunPlan) -> str:
    """The precision the check's tolerance assumes: TF32 matmuls keep a 10-bit mantissa."""
    spec = plan.spec
    if plan.compute_dtype == "float32" and spec.tf32 and spec.device.startswith("cuda"):
        return "tf32"
    return plan.compute_dtype


def both(first: Callable[[], Any] | None, second: Callable[[], Any] | None) -> Callable[[], Any] | None:
    """One between-steps callable that runs `first` then `second`, either of which may be None."""
    if first is None or second is None:
        return first or second

    def run_both() -> None:
        first()
        second()

    return run_both


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _over_limit(est: float, limit: float) -> str:
    """'at 2.04 s (limit 2.00 s)': as many decimals as it takes for the two figures to differ, so a
    refusal never reads "estimated at 2.0 s (limit 2.0 s)"; past four, 'above its limit of …'."""
    scale, unit = (60.0, "min") if limit >= 60 else ((1.0, "s") if limit >= 1 else (1e-3, "ms"))
    for decimals in range(0 if unit == "ms" else 1, 5):
        shown, bound = f"{est / scale:.{decimals}f}", f"{limit / scale:.{decimals}f}"
        if shown != bound:
            return f"at {shown} {unit} (limit {bound} {unit})"
    return f"above its limit of {_fmt_s(limit)}"


def _fmt_s(s: float) -> str:
    if s >= 60:
        return f"{s / 60:.1f} min"
    if s >= 1:
        return f"{s:.1f} s"
    return f"{s * 1e3:.0f} ms"
