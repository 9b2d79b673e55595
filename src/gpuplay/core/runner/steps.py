"""The zero-argument callable a timer calls: the kernel, with compile, AMP and transfers as asked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpuplay.core.planner import AMP_DTYPES
from gpuplay.core.runner.plan import RunPlan


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
