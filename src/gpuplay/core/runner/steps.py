"""The zero-argument callable a timer calls: the kernel, with compile, AMP and transfers as asked.

`prepare_step` is the one way a step is made ready, for a measurement (runner.measure, paired runs)
and for a profile alike: inputs, the step, its first (compiling) call, warm-up, a CUDA graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuplay.core.catalogue.planner import AMP_DTYPES
from gpuplay.core.runner.inputs import device_inputs, prime_reference, transfer_inputs
from gpuplay.core.runner.plan import RunPlan
from gpuplay.core.workloads.base import SetupReport

Step = Callable[[], Any]
# The first call of a compiled step, given the step and a way to rebuild it eager; the step to go on with.
FirstCall = Callable[[Step, Callable[[], Step]], Step]


def build_step(
    plan: RunPlan,
    args: tuple[Any, ...],
    host_args: tuple[np.ndarray, ...] | None = None,
    compiled: bool = True,
) -> Callable[[], Any]:
    """One step of `plan` on `args` (or, when transfers are timed, uploads of `host_args`)."""
    spec, backend = plan.spec, plan.backend
    kernel = plan.workload.kernel(backend.name, backend.module(), plan.params)
    if compiled and spec.compile != "off":
        kernel = backend.compile(kernel, spec.compile)
    if spec.amp != "off":
        kernel = backend.autocast(kernel, spec.device, AMP_DTYPES[spec.amp])
    if plan.timed_transfers and host_args is not None:
        upload, download = backend.from_host, backend.download
        device, dtype = spec.device, spec.dtype

        def step() -> Any:
            return download(kernel(*(upload(h, device, dtype) for h in host_args)))

        return step
    return lambda: kernel(*args)


@dataclass(frozen=True)
class PreparedStep:
    step: Step  # compiled, warmed up and (with cuda_graphs) captured: as it will be timed
    setup_s: float  # making the inputs on the device (an export or build is reported apart)
    report: SetupReport | None = None  # what the workload's prepare built (runtimes, loaders)


def prepare_step(
    plan: RunPlan,
    warm_up: Callable[[Step], object],
    *,
    first_call: FirstCall | None = None,
    on_phase: Callable[[str], object] = lambda _name: None,
) -> PreparedStep:
    """Make `plan`'s step ready: inputs on the device (and on the host when transfers are timed),
    the step built, `first_call` on it when it compiles (which may fall back to eager), `warm_up`,
    then the CUDA graph capture. `on_phase` hears "setup", "compile" and "warmup" as they start."""
    spec, backend = plan.spec, plan.backend
    on_phase("setup")
    reference_s = 0.0

    def reference_from(hosts: tuple[np.ndarray, ...]) -> None:
        # The check's float64 reference from these very inputs, not from a second generation of
        # them after the run; its time is not the set-up's (the check's, as it was).
        nonlocal reference_s
        t = time.perf_counter()
        prime_reference(plan.workload, plan.params, spec.seed, hosts)
        reference_s = time.perf_counter() - t

    t0 = time.perf_counter()
    # Not for a user's code: its reference runs the user's step, whose first call belongs to
    # the watched phases (a step that never returns is stopped there, not in an unwatched set-up).
    primes = spec.check and not plan.workload.user_code
    args = device_inputs(plan, reference_from if primes else None)
    backend.synchronize(spec.device)
    setup_s = max(0.0, time.perf_counter() - t0 - reference_s)
    report = plan.workload.setup_report(args)
    if report is not None and report.build_s is not None and report.built_now:
        setup_s = max(0.0, setup_s - report.build_s)  # the build is its own figure, like a compile
    host_args = transfer_inputs(plan) if plan.timed_transfers else None
    step = build_step(plan, args, host_args)
    if spec.compile != "off" and first_call is not None:
        on_phase("compile")
        step = first_call(step, lambda: build_step(plan, args, host_args, compiled=False))
    on_phase("warmup")
    warm_up(step)
    if spec.cuda_graphs:
        step = backend.capture_graph(step, spec.device)
    return PreparedStep(step, setup_s, report)
