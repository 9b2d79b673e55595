"""Measuring one spec. The entry point is `run(spec, ...) -> RunResult`.

plan.py       a spec resolved once: workload, backend, compute dtype, parameters, cost
preflight.py  the memory check and the step-cost estimate before committing
inputs.py     inputs made as a user's script makes them; cached float64 references
steps.py      the step callable (compile, AMP, transfers through the Backend interface) and
              prepare_step: inputs, compile, warm-up, CUDA graph (measure and profile alike)
loop.py       the timed loop
measure.py    the phases in order, filling in the RunResult
"""

from gpuplay.core.runner.inputs import clear_caches, device_inputs, host_inputs, reference
from gpuplay.core.runner.loop import Cancelled, LoopOutcome, PhaseCallback, SampleCallback, timed_loop
from gpuplay.core.runner.measure import TelemetryWindow, run
from gpuplay.core.runner.plan import RunPlan, conditions, plan_run
from gpuplay.core.runner.preflight import estimate_step_seconds, memory_shortfall
from gpuplay.core.runner.steps import PreparedStep, build_step, prepare_step

__all__ = [
    "Cancelled",
    "LoopOutcome",
    "PreparedStep",
    "PhaseCallback",
    "RunPlan",
    "SampleCallback",
    "TelemetryWindow",
    "build_step",
    "prepare_step",
    "clear_caches",
    "conditions",
    "device_inputs",
    "estimate_step_seconds",
    "host_inputs",
    "memory_shortfall",
    "plan_run",
    "reference",
    "run",
    "timed_loop",
]
