"""What an engine does with a request, wherever it runs: the engine process and the in-process engine.

A run or a profile waits for its device (one measurement per device across every gpuplay process),
measures, and answers with one message; its progress (phases, step timings) goes to `emit` as the
same typed messages the engine process sends its client. A CUDA error that poisons the context is
flagged on the answer (`poisoned`): the engine process then exits, since only a new process recovers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gpuplay.core.engine.messages import (
    Finished,
    Phase,
    Profiled,
    ProfileRequest,
    Progress,
    RunRequest,
    Samples,
)
from gpuplay.core.engine.protocol import SAMPLE_BATCH_S, SampleBatcher
from gpuplay.core.engine.steplimit import held_to_limit
from gpuplay.core.measure.cuda_errors import is_sticky_cuda_error
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

Emit = Callable[[Progress], None]
ENGINE_RESTARTS = "the CUDA context is poisoned by this error; the engine restarts"


def run_job(
    req: RunRequest,
    emit: Emit,
    cancel: threading.Event,
    pause: threading.Event,
    *,
    telemetry: Any = None,
    probe_timeout: float | None = 30.0,
    batch_s: float = SAMPLE_BATCH_S,
    poisoned_note: str = ENGINE_RESTARTS,
) -> Finished:
    """Measure `req.spec` (paired with `req.baseline` if set) under the device lock. Never raises
    but for KeyboardInterrupt: what a user can cause, the runner reports; anything else is ours."""
    from gpuplay.core.engine.devicelock import measure_exclusively
    from gpuplay.core.runner import run
    from gpuplay.core.runner.paired import run_pair

    spec = req.spec
    # A live request hears every step timing; one that is not (a headless command: its client's
    # watchdog only needs proof of progress) hears the last of each batch, a tick at most ~10 times
    # a second. Where there is no pipe (batch_s 0: in-process) nobody needs ticks.
    last = (lambda batch: batch) if req.live else (lambda batch: batch[-1:])
    batcher = SampleBatcher(lambda batch: emit(Samples(req.run_id, tuple(last(batch)))), batch_s)
    on_sample = batcher.add if req.live or batch_s > 0 else None

    def on_phase(name: str, _detail: str) -> None:
        emit(Phase(req.run_id, name))

    # A paired run answers with the baseline's own result too: its row, from the same pairs.
    baseline: list[RunResult | None] = [None]

    def paired(spec: RunSpec, **kw: Any) -> RunResult:
        assert req.baseline is not None
        result, baseline[0] = run_pair(spec, req.baseline, **kw)
        return result

    measure: Any = run if req.baseline is None else paired
    try:
        # One measurement per device across every gpuplay process: a second one waits here.
        result = measure_exclusively(
            spec,
            lambda: measure(
                spec,
                on_sample=on_sample,
                cancel=cancel,
                pause=pause,
                on_phase=on_phase,
                telemetry=telemetry,
                probe_timeout=probe_timeout,
            ),  # fmt: skip
            cancel,
            on_phase,
        )
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        result = RunResult(spec=spec, status="failed", failure="error", message=f"engine: {exc!r}")
    batcher.flush()
    held_to_limit(result)  # a step over the limit that finished anyway is no result
    if result.status == "failed" and is_sticky_cuda_error(result.message):
        result.failure = "cuda-context"
        result.notes.append(poisoned_note)
    return Finished(req.run_id, result, baseline[0])


def profile_job(
    req: ProfileRequest, emit: Emit, cancel: threading.Event, *, poisoned_note: str = ENGINE_RESTARTS
) -> Profiled:
    """torch.profiler over `req.steps` steps of `req.spec`, under the device lock like a run."""
    from gpuplay.core.engine.devicelock import WaitCancelled, device_lock, load_library
    from gpuplay.core.runner.profile import profile_spec

    spec = req.spec
    # The library that names the GPU's UUID, loaded before the lock is named, as a run's is
    # (devicelock.measure_exclusively): else a fresh engine's profile keys the GPU by its ordinal.
    load_library(spec.backend, spec.device)
    try:
        # A profile runs the workload too: it waits for the device like a measurement.
        with device_lock(spec.device, cancel, lambda m: emit(Phase(req.run_id, m))):
            data = profile_spec(spec, steps=req.steps)
    except WaitCancelled as exc:
        data = {"status": "cancelled", "message": str(exc)}
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # profile_spec reports what a user can cause; anything else is ours
        data = {"status": "failed", "message": f"engine: {exc!r}"}
    if data.get("failure") == "cuda-context" or (
        data.get("status") == "failed" and is_sticky_cuda_error(str(data.get("message", "")))
    ):
        data["failure"] = "cuda-context"
        data.setdefault("notes", []).append(poisoned_note)
    return Profiled(req.run_id, data)


def poisoned(answer: Finished | Profiled) -> bool:
    """The answer reports a CUDA error that poisons the process's context."""
    if isinstance(answer, Finished):
        return answer.result.failure == "cuda-context"
    return answer.data.get("failure") == "cuda-context"
