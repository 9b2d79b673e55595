"""Run one measurement: plan, estimate, set up, compile, warm up, time, check.

`run()` is plain code driven by callbacks and a `threading.Event`: the CLI calls
it directly, the app calls it from a thread worker, and both see the same phases.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import Backend, StepTimer
from gpuplay.core.planner import AMP_DTYPES, check, compute_dtype
from gpuplay.core.result import RunResult
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.system import cpu_count, cpu_name
from gpuplay.core.workloads import get_workload, relative_error
from gpuplay.core.workloads.base import ITEMSIZE, Workload

SampleCallback = Callable[[str, float], None]
PhaseCallback = Callable[[str, str], object]  # the return value is ignored


class TelemetryWindow(Protocol):
    """What the runner needs from a telemetry sampler: bracket the timed phase."""

    def begin(self, device: str) -> Any: ...

    def end(self, token: Any) -> dict[str, Any]: ...


class Cancelled(Exception):
    pass


@dataclass
class LoopOutcome:
    samples: list[float]
    last: Any
    cancelled: bool


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _wait_while_paused(pause: threading.Event | None, cancel: threading.Event) -> None:
    while pause is not None and pause.is_set() and not cancel.is_set():
        cancel.wait(0.05)


def timed_loop(
    fn: Callable[[], Any],
    timer: StepTimer,
    *,
    phase: str,
    count: int | None,
    budget_s: float | None = None,
    min_count: int = 1,
    max_count: int = 1_000_000,
    cancel: threading.Event,
    pause: threading.Event | None = None,
    on_sample: SampleCallback | None = None,
) -> LoopOutcome:
    """Time `fn` step by step until `count` steps, or `budget_s` and `min_count`, or cancel.

    Only `timer(fn)` is inside the measured interval; the checks and the callback
    run between steps.
    """
    samples: list[float] = []
    append = samples.append
    last: Any = None
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    n = 0
    is_cancelled = cancel.is_set
    while True:
        if count is not None and n >= count:
            break
        if count is None and n >= min_count and (deadline is None or time.perf_counter() >= deadline):
            break
        if n >= max_count:
            break
        if is_cancelled():
            return LoopOutcome(samples, last, True)
        if pause is not None and pause.is_set():
            _wait_while_paused(pause, cancel)
            continue
        last = None  # free the previous output first, as a user's loop would
        dt, last = timer(fn)
        append(dt)
        n += 1
        if on_sample is not None:
            on_sample(phase, dt)
    return LoopOutcome(samples, last, False)


# -- caches: inputs and references are the same for every backend of a compare ----
class _LRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


_inputs_cache = _LRU(2)
_reference_cache = _LRU(4)


def host_inputs(workload: Workload, p: dict[str, Any], seed: int) -> tuple[np.ndarray, ...]:
    key = (workload.name, tuple(sorted(p.items())), seed)
    return _inputs_cache.get(key, lambda: workload.inputs(p, np.random.default_rng(seed)))


def reference(workload: Workload, p: dict[str, Any], seed: int) -> np.ndarray:
    key = (workload.name, tuple(sorted(p.items())), seed)
    return _reference_cache.get(key, lambda: workload.reference(p, host_inputs(workload, p, seed)))


def clear_caches() -> None:
    _inputs_cache.clear()
    _reference_cache.clear()


# -- building the step ---------------------------------------------------------
def _autocast(spec: RunSpec) -> Callable[[], Any]:
    import torch

    device_type = spec.device.split(":")[0]
    dtype = getattr(torch, AMP_DTYPES[spec.amp])
    return lambda: torch.autocast(device_type=device_type, dtype=dtype)


def _import_inductor_quietly() -> None:
    """Load torch.compile's backend with torch's own deprecation notice silenced.

    torch.compile imports torch._inductor, which imports torch.utils.mkldnn, whose classes
    still use the deprecated `torch.jit.script_method`: 14 DeprecationWarnings per process
    about torch's code, none a gpuplay user could act on. Only that message is filtered,
    only during the import.
    """
    import sys
    import warnings

    if "torch._inductor.compile_fx" in sys.modules:
        return
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.script_method` is deprecated", category=DeprecationWarning
        )
        import torch._inductor.compile_fx  # noqa: F401


def build_step(
    spec: RunSpec,
    workload: Workload,
    backend: Backend,
    p: dict[str, Any],
    args: tuple[Any, ...],
    host_args: tuple[np.ndarray, ...] | None = None,
    compiled: bool = True,
) -> Callable[[], Any]:
    """The zero-argument callable the timer calls: kernel, plus AMP and transfers if asked."""
    kernel = workload.kernel(backend.name, backend.module(), p)
    if compiled and spec.compile != "off":
        import torch

        _import_inductor_quietly()
        kernel = torch.compile(kernel, mode=None if spec.compile == "default" else spec.compile)
    if spec.amp != "off":
        autocast = _autocast(spec)
        inner = kernel

        def kernel(*a: Any) -> Any:
            with autocast():
                return inner(*a)

    if spec.transfers and spec.device != "cpu" and host_args is not None:
        upload, download = backend.from_host, backend.download
        device, dtype = spec.device, spec.dtype

        def step() -> Any:
            return download(kernel(*(upload(h, device, dtype) for h in host_args)))

        return step
    return lambda: kernel(*args)


def _capture_graph(step: Callable[[], Any], device: str) -> Callable[[], Any]:
    """Record `step` once in a CUDA graph; each timed step is then one replay."""
    import torch

    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):  # warm the allocator on a side stream, as capture requires
        for _ in range(2):
            step()
    torch.cuda.current_stream(device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step()

    def replay() -> Any:
        graph.replay()
        return static_out

    return replay


# -- estimating a step's cost before committing to it ---------------------------
def estimate_step_seconds(
    spec: RunSpec,
    workload: Workload,
    backend: Backend,
    p: dict[str, Any],
    timer: StepTimer,
    limit_s: float,
    cancel: threading.Event,
) -> float:
    """Time the workload at growing fractions of its size and extrapolate by FLOPs.

    Doubling the probe until it costs a noticeable fraction of the limit catches
    costs that grow faster than FLOPs (half precision emulated on a CPU falls
    out of cache), at a total probe cost of about limit/4 at most.
    """
    full = workload.flops(p) or workload.bytes_moved(p, 4)
    estimate = 0.0
    for factor in (1 / 16, 1 / 8, 1 / 4, 1 / 2):
        if cancel.is_set():
            raise Cancelled
        ps = workload.effective(workload.scaled(p, factor), backend.name, compute_dtype(spec))
        work = workload.flops(ps) or workload.bytes_moved(ps, 4)
        if work >= full or work <= 0:
            break
        # Probe inputs bypass the cache: they would evict the full-size inputs a compare reuses.
        probe_inputs = workload.inputs(ps, np.random.default_rng(spec.seed))
        args = tuple(backend.from_host(a, spec.device, spec.dtype) for a in probe_inputs)
        step = build_step(spec, workload, backend, ps, args, compiled=False)
        first, _ = timer(step)
        t = first
        if first < limit_s / 8:
            t, _ = timer(step)  # the first call pays one-off costs; the second is the step
        estimate = t * full / work
        del args, step, probe_inputs
        if estimate < limit_s / 4 or t > limit_s / 16:
            break
    return estimate


def memory_shortfall(spec: RunSpec, workload: Workload, backend: Backend, p: dict[str, Any]) -> str:
    """Why the data cannot fit (host float64 inputs and reference, device copies), or ''."""
    import psutil

    elements = workload.footprint_elements(p)
    host_need = elements * 8 * 2  # float64 inputs and the float64 reference
    device_need = elements * ITEMSIZE[spec.dtype] * 2  # device inputs and outputs, with slack
    if spec.device == "cpu":
        host_need += device_need
    available = psutil.virtual_memory().available
    gib = 2**30
    if host_need > available:
        return (
            f"needs ~{host_need / gib:.1f} GiB of host memory at {workload.size_label(p)}, "
            f"{available / gib:.1f} GiB available: choose a smaller size"
        )
    if spec.device.startswith("cuda") and spec.backend == "torch":
        import torch

        free, _total = torch.cuda.mem_get_info(spec.device)
        if device_need > free:
            return (
                f"needs ~{device_need / gib:.1f} GiB on {spec.device}, {free / gib:.1f} GiB free: "
                "choose a smaller size"
            )
    return ""


# -- conditions ----------------------------------------------------------------
def conditions(spec: RunSpec, backend: Backend, cdtype: str) -> dict[str, Any]:
    from gpuplay.core.backends.numpy_backend import blas_threads

    threads: dict[str, Any] = {"cores": cpu_count(), "numpy_blas": blas_threads()}
    with contextlib.suppress(Exception):
        threads.update(backend.thread_counts())
    device_name = cpu_name() if spec.device == "cpu" else backend.device_name(spec.device)
    return {
        "backend": backend.name,
        "backend_version": backend.version(),
        "device": spec.device,
        "device_name": device_name,
        "dtype": spec.dtype,
        "compute_dtype": cdtype,
        "amp": spec.amp,
        "compile": spec.compile,
        "tf32": spec.tf32,
        "cuda_graphs": spec.cuda_graphs,
        "transfers_timed": spec.transfers and spec.device != "cpu",
        "threads": threads,
        "timer": "CUDA events" if spec.device.startswith("cuda") else "perf_counter_ns (synchronous)",
        "warmup": spec.warmup,
        "compile_time_excluded": spec.compile != "off",
    }


# -- the run -------------------------------------------------------------------
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
    cancel = cancel or threading.Event()
    result = RunResult(spec=spec, started=_now())

    def phase(name: str, detail: str = "") -> None:
        if on_phase is not None:
            on_phase(name, detail)

    plan = check(spec, probe_timeout)
    if isinstance(plan, Refusal):
        result.status, result.message, result.finished = "refused", str(plan), _now()
        return result
    result.notes.extend(plan.notes)
    workload = get_workload(spec.workload)
    backend = get_backend(spec.backend)
    cdtype = compute_dtype(spec)
    result.compute_dtype = cdtype
    p = workload.effective(workload.resolve(spec.params), backend.name, cdtype)
    result.size = workload.size_label(p)
    result.flops = workload.flops(p)
    result.bytes = workload.bytes_moved(p, ITEMSIZE[spec.dtype])
    args: tuple[Any, ...] = ()
    out: Any = None
    try:
        with backend.configured(spec) as notes:
            result.conditions = conditions(spec, backend, cdtype)
            timer = backend.step_timer(spec.device)

            shortfall = memory_shortfall(spec, workload, backend, p)
            if shortfall:
                result.status, result.failure, result.message = "refused", "out-of-memory", shortfall
                return result

            phase("estimate")
            est = estimate_step_seconds(spec, workload, backend, p, timer, spec.max_step_s, cancel)
            result.estimate_s = est
            if est > spec.max_step_s:
                result.status = "refused"
                result.message = (
                    f"one step is estimated at {_fmt_s(est)} (limit {_fmt_s(spec.max_step_s)}) for "
                    f"{spec.label()} at {result.size}; choose a smaller size or raise the step limit"
                )
                return result

            phase("setup")
            t0 = time.perf_counter()
            hosts = host_inputs(workload, p, spec.seed)
            args = tuple(backend.from_host(a, spec.device, spec.dtype) for a in hosts)
            backend.synchronize(spec.device)
            result.setup_s = time.perf_counter() - t0
            host_typed = None
            if spec.transfers and spec.device != "cpu":
                host_typed = tuple(np.ascontiguousarray(a, dtype=_host_dtype(spec.dtype)) for a in hosts)
            step = build_step(spec, workload, backend, p, args, host_typed)

            if spec.compile != "off":
                phase("compile")
                try:
                    result.compile_s, out = timer(step)
                    if on_sample:
                        on_sample("compile", result.compile_s)
                except Exception as exc:
                    if backend.is_out_of_memory(exc):
                        raise
                    result.failure = "compile"
                    result.notes.append(
                        f"torch.compile failed ({type(exc).__name__}: {_first_line(exc)}); this is an EAGER run"
                    )
                    result.conditions["compile"] = f"failed: ran eager ({spec.compile} requested)"
                    step = build_step(spec, workload, backend, p, args, host_typed, compiled=False)

            phase("warmup")
            warm = timed_loop(
                step,
                timer,
                phase="warmup",
                count=spec.warmup,
                cancel=cancel,
                pause=pause,
                on_sample=on_sample,
            )
            result.warmup = warm.samples
            if warm.cancelled:
                raise Cancelled
            if spec.cuda_graphs:
                step = _capture_graph(step, spec.device)

            phase("timed")
            token = telemetry.begin(spec.device) if telemetry is not None else None
            timed = timed_loop(
                step,
                timer,
                phase="timed",
                count=spec.repeat,
                budget_s=spec.budget_s,
                min_count=spec.min_repeat,
                max_count=spec.max_repeat,
                cancel=cancel,
                pause=pause,
                on_sample=on_sample,
            )
            if telemetry is not None:
                result.telemetry = telemetry.end(token)
                gpu = result.telemetry.get("gpu")
                if gpu and gpu.get("energy_j") is not None and timed.samples:
                    gpu["energy_per_step_j"] = gpu["energy_j"] / len(timed.samples)
            result.samples = timed.samples
            out = timed.last if timed.last is not None else warm.last
            if timed.cancelled:
                raise Cancelled
            result.notes.extend(notes)

            if spec.check and out is not None:
                phase("check")
                got = workload.checked(backend.to_host(out), p)
                result.error = relative_error(got, reference(workload, p, spec.seed))
                result.tolerance = float(workload.tolerance(cdtype, p))
                if not np.isfinite(result.error):
                    result.failure = "not-finite"
                    result.notes.append(f"the result holds NaN or inf ({cdtype} overflowed or lost range)")
    except Cancelled:
        result.status, result.message = "cancelled", "cancelled by the user"
    except Exception as exc:
        result.status = "failed"
        if backend.is_out_of_memory(exc):
            result.failure = "out-of-memory"
            result.message = f"out of memory on {spec.device} at {result.size}: choose a smaller size"
        else:
            result.failure = result.failure or "error"
            result.message = f"{type(exc).__name__}: {_first_line(exc)}"
    finally:
        del args, out
        if result.status == "failed" and result.failure == "out-of-memory":
            clear_caches()
        with contextlib.suppress(Exception):
            backend.free_memory(spec.device)
        result.finished = _now()
    return result


def _host_dtype(dtype: str) -> Any:
    # NumPy has no bfloat16: bf16 transfers move float32 host data and convert on the device.
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}.get(dtype, np.float32)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _fmt_s(s: float) -> str:
    if s >= 60:
        return f"{s / 60:.1f} min"
    if s >= 1:
        return f"{s:.1f} s"
    return f"{s * 1e3:.0f} ms"
