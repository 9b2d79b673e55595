"""Profile a configuration with operator granularity: what runs, how often, and what is overhead.

torch.profiler (CPU and, on a CUDA device, CUDA activities) over a few steps of
a RunSpec's configuration, built exactly as the runner builds it (compile, AMP,
CUDA graphs). CuPy: cupyx.profiler.benchmark, CPU and GPU time apart. The result
is plain data (a dict) for the CLI, the app and JSON.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuplay.core.measure.cuda_errors import is_sticky_cuda_error
from gpuplay.core.measure.torchprof import profile_torch
from gpuplay.core.spec import Refusal, RunSpec

if TYPE_CHECKING:
    from gpuplay.core.runner.plan import RunPlan


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


def _warm_up(plan: RunPlan, into: dict[str, Any]) -> Callable[[Callable[[], Any]], None]:
    """Compile and warm up outside the profile (two calls at least); its time into `warmup_s`."""

    def warm_up(step: Callable[[], Any]) -> None:
        t0 = time.perf_counter()
        for _ in range(max(2, plan.spec.warmup)):
            step()
        plan.backend.synchronize(plan.spec.device)
        into["warmup_s"] = time.perf_counter() - t0

    return warm_up


def profile_spec(
    spec: RunSpec, steps: int = 5, trace: str | None = None, probe_timeout: float | None = 30.0
) -> dict[str, Any]:
    """Profile `steps` steps of `spec`. Never raises for a user's mistake: 'status' says what happened."""
    from gpuplay.core.runner.plan import plan_run
    from gpuplay.core.runner.steps import prepare_step

    base: dict[str, Any] = {"label": spec.label(), "scenario": spec.scenario, "steps": steps, "status": "ok"}
    plan = plan_run(spec, probe_timeout)
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
            step = prepare_step(plan, _warm_up(plan, base)).step  # built as the runner builds it
            if spec.backend == "cupy":
                data = _profile_cupy(step, steps)
            else:
                data = profile_torch(step, spec.device, steps, trace)
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
