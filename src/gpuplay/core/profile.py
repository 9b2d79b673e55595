"""Profile a configuration with operator granularity: what runs, how often, and what is overhead.

torch.profiler (CPU and, on a CUDA device, CUDA activities) over a few steps of
a RunSpec's configuration, built exactly as the runner builds it (compile, AMP,
CUDA graphs). CuPy: cupyx.profiler.benchmark, CPU and GPU time apart. The result
is plain data (a dict) for the CLI, the app and JSON.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuplay.core.cuda_errors import is_sticky_cuda_error
from gpuplay.core.spec import Refusal, RunSpec

STEP_MARK = "gpuplay step"
# Profiler bookkeeping, not work the user's code asked for.
_BOOKKEEPING = ("ProfilerStep", STEP_MARK, "TorchDynamo Cache Lookup", "Pregraph bytecode")
_COMPILED_CALL = "## Call CompiledFxGraph"
TOP = 12


def _is_bookkeeping(name: str) -> bool:
    return name.startswith(_BOOKKEEPING)


def _device_us(e: Any) -> float:
    """GPU time of an operator (its kernels included), in µs; the API renamed cuda → device in 2.4."""
    for attr in ("device_time_total", "cuda_time_total"):
        v = getattr(e, attr, None)
        if v:
            return float(v)
    return 0.0


def _kernel_us(e: Any) -> float:
    """Duration of one device event (a kernel, a copy) on the GPU's own clock, in µs."""
    span = getattr(e, "time_range", None)
    return float(span.elapsed_us()) if span is not None else _device_us(e)


def _is_device_event(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).endswith(("CUDA", "PrivateUse1"))


def _cpu_ops_in(e: Any) -> int:
    """Operator calls under a step marker: an aten op counts once (its internals are one call);
    a compiled graph counts as the library calls inside it, or one for its generated code."""
    name = e.name
    if name.startswith("aten::"):
        return 1
    children = list(e.cpu_children)
    if name.startswith(_COMPILED_CALL):
        return max(1, sum(_cpu_ops_in(c) for c in children))
    return sum(_cpu_ops_in(c) for c in children)


@contextlib.contextmanager
def _native_stderr_quiet() -> Iterator[None]:
    """Silence what the profiler's C++ side (Kineto) writes to file descriptor 2 at start and stop.

    Its 'USDT … profiler_start' lines are not ours to show; Python-level errors
    still raise as exceptions and are reported normally.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            sys.stderr.flush()
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profile_torch(step: Callable[[], Any], device: str, steps: int, trace: str | None) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    with _native_stderr_quiet(), profile(activities=activities) as prof:
        for i in range(steps):
            with record_function(f"{STEP_MARK} {i}"):
                step()
                sync()  # inside the mark: a step ends when the device is done
    events = list(prof.events())
    marks = [e for e in events if e.name.startswith(STEP_MARK) and not _is_device_event(e)]
    wall_us = sum(float(e.cpu_time_total) for e in marks) / max(1, len(marks))

    ops: dict[str, dict[str, float]] = {}
    for avg in prof.key_averages():
        if _is_bookkeeping(avg.key) or str(getattr(avg, "device_type", "")).endswith("CUDA"):
            continue
        ops[avg.key] = {
            "calls": avg.count / steps,
            "self_cpu_ms": avg.self_cpu_time_total / steps / 1e3,
            "cpu_total_ms": avg.cpu_time_total / steps / 1e3,
            "device_ms": _device_us(avg) / steps / 1e3,
        }
    top_ops = [{"name": k, **v} for k, v in sorted(ops.items(), key=lambda kv: -kv[1]["self_cpu_ms"])[:TOP]]

    kernels: dict[str, dict[str, float]] = {}
    for e in events:
        if _is_device_event(e):
            k = kernels.setdefault(e.name, {"calls": 0.0, "device_ms": 0.0})
            k["calls"] += 1 / steps
            k["device_ms"] += _kernel_us(e) / steps / 1e3
    top_kernels = [
        {"name": k, **v} for k, v in sorted(kernels.items(), key=lambda kv: -kv[1]["device_ms"])[:TOP]
    ]
    if cuda:
        launches = [k for k in kernels if not k.startswith(("Memcpy", "Memset"))]
        per_step = sum(kernels[k]["calls"] for k in launches)
        busy_ms = sum(kernels[k]["device_ms"] for k in kernels)
        counted = "CUDA kernels launched"
        definition = "share of the step's wall time the GPU ran no kernel or copy (launch and host overhead)"
    else:
        per_step = sum(_cpu_ops_in(c) for m in marks for c in m.cpu_children) / max(1, len(marks))
        work = [e for e in events if e.name.startswith(("aten::", _COMPILED_CALL))]
        busy_ms = sum(float(e.self_cpu_time_total) for e in work)
        busy_ms = busy_ms / steps / 1e3
        counted = "operator calls (a compiled graph's generated code counts as one)"
        definition = "share of the step's wall time spent outside any operator (Python, dispatch, guards)"
    wall_ms = wall_us / 1e3
    out: dict[str, Any] = {
        "tool": f"torch.profiler (PyTorch {torch.__version__})",
        "activities": ["cpu", "cuda"] if cuda else ["cpu"],
        "wall_ms_per_step": wall_ms,
        "busy_ms_per_step": busy_ms,
        "kernels_per_step": per_step,
        "kernels_counted": counted,
        "overhead_share": max(0.0, 1.0 - busy_ms / wall_ms) if wall_ms > 0 else None,
        "overhead_definition": definition,
        "top_ops": top_ops,
        "top_kernels": top_kernels,
        "trace": None,
    }
    if trace:
        path = Path(trace).expanduser()
        # Written beside its destination and renamed: an interrupted export never leaves half a
        # trace under the name the user gave (nor replaces a good one with it).
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.open("w").close()  # the exporter logs a failure instead of raising: check first
            with _native_stderr_quiet():
                prof.export_chrome_trace(str(tmp))
            if tmp.stat().st_size == 0:
                raise OSError("the profiler wrote nothing")
            os.replace(tmp, path)
            out["trace"] = str(path)
        except OSError as exc:
            out["trace_error"] = f"cannot write the trace to {path}: {exc.strerror or exc}"
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return out


def kernel_count(step: Callable[[], Any], device: str) -> tuple[float, str]:
    """Kernels (CUDA) or operator calls (CPU) one step runs, measured with torch.profiler."""
    data = _profile_torch(step, device, 1, None)
    return float(data["kernels_per_step"]), str(data["kernels_counted"])


def _profile_cupy(step: Callable[[], Any], steps: int) -> dict[str, Any]:
    import cupy
    from cupyx.profiler import benchmark

    res = benchmark(step, n_repeat=steps, n_warmup=0)
    cpu_ms = float(res.cpu_times.mean()) * 1e3
    gpu_ms = float(res.gpu_times.mean()) * 1e3
    return {
        "tool": f"cupyx.profiler.benchmark (CuPy {cupy.__version__})",
        "activities": ["cpu", "cuda"],
        "wall_ms_per_step": max(cpu_ms, gpu_ms),
        "busy_ms_per_step": gpu_ms,
        "kernels_per_step": None,
        "kernels_counted": "not itemised: run under Nsight Systems (nsys) for CuPy's kernel list",
        "overhead_share": max(0.0, 1.0 - gpu_ms / cpu_ms) if cpu_ms > 0 else None,
        "overhead_definition": "1 − GPU time / CPU time per step (cupyx.profiler.benchmark)",
        "top_ops": [],
        "top_kernels": [],
        "trace": None,
    }


def profile_spec(
    spec: RunSpec, steps: int = 5, trace: str | None = None, probe_timeout: float | None = 30.0
) -> dict[str, Any]:
    """Profile `steps` steps of `spec`. Never raises for a user's mistake: 'status' says what happened."""
    from gpuplay.core.runner.inputs import device_inputs
    from gpuplay.core.runner.plan import resolve
    from gpuplay.core.runner.steps import build_step

    base: dict[str, Any] = {"label": spec.label(), "scenario": spec.scenario, "steps": steps, "status": "ok"}
    plan = resolve(spec, probe_timeout)
    if isinstance(plan, Refusal):
        return {**base, "status": "refused", "message": str(plan)}
    if spec.backend == "numpy":
        return {
            **base,
            "status": "refused",
            "message": "torch.profiler sees PyTorch operators only and NumPy calls are not operators "
            "(profile -b torch, or NumPy with python -m cProfile)",
        }
    backend = plan.backend
    base["size"] = plan.size
    try:
        with backend.configured(spec) as notes:
            args = device_inputs(plan)
            step = build_step(plan, args)
            t0 = time.perf_counter()
            for _ in range(max(2, spec.warmup)):  # compile and warm up outside the profile
                step()
            backend.synchronize(spec.device)
            base["warmup_s"] = time.perf_counter() - t0
            if spec.cuda_graphs:
                step = backend.capture_graph(step, spec.device)
            if spec.backend == "cupy":
                data = _profile_cupy(step, steps)
            else:
                data = _profile_torch(step, spec.device, steps, trace)
            return {**base, **data, "notes": [*plan.notes, *notes]}
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        failed = {**base, "status": "failed", "message": f"{type(exc).__name__}: {first}"}
        if is_sticky_cuda_error(str(exc)):
            # Every later CUDA call in this process fails: the engine restarts on this flag.
            failed["failure"] = "cuda-context"
            failed["notes"] = ["the CUDA context is poisoned by this error; a new process is needed"]
        return failed
    finally:
        with contextlib.suppress(Exception):
            backend.free_memory(spec.device)
