"""A spec resolved once into what every phase of a run needs.

The planner's checks find the workload, its parameters and the compute dtype;
the plan keeps them with the backend, the effective parameters and the cost,
and is handed down to preflight, step building and the timed phases, which
never go back to the registries.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import Backend
from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.planner import assess
from gpuplay.core.hw.system import cpu_count, cpu_name
from gpuplay.core.measure import provenance
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads.base import ITEMSIZE, Workload


@dataclass(frozen=True)
class RunPlan:
    spec: RunSpec
    workload: Workload
    backend: Backend
    compute_dtype: str
    params: dict[str, Any]  # effective: resolved, with what the backend decides filled in
    notes: tuple[str, ...] = ()
    size: str = field(init=False)
    flops: float = field(init=False)
    bytes: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", self.workload.size_label(self.params))
        object.__setattr__(self, "flops", float(self.workload.flops(self.params)))
        object.__setattr__(
            self, "bytes", float(self.workload.bytes_moved(self.params, ITEMSIZE[self.spec.dtype]))
        )

    @property
    def work(self) -> float:
        """The size of a step for extrapolating cost: FLOPs, else bytes at 4 per element."""
        return self.flops or float(self.workload.bytes_moved(self.params, 4))

    @property
    def timed_transfers(self) -> bool:
        return self.spec.transfers and self.spec.device != "cpu"

    def scaled(self, factor: float) -> RunPlan:
        """The same plan with every size parameter multiplied by `factor` (cost probes)."""
        w = self.workload
        params = w.effective(w.scaled(self.params, factor), self.backend.name, self.compute_dtype)
        return RunPlan(self.spec, w, self.backend, self.compute_dtype, params, self.notes)


def plan_run(spec: RunSpec, probe_timeout: float | None = None) -> RunPlan | Refusal:
    """The plan for `spec`, or the Refusal saying why it cannot run here."""
    found = assess(spec, probe_timeout)
    if isinstance(found, Refusal):
        return found
    backend = get_backend(spec.backend)
    params = found.workload.effective(found.params, backend.name, found.compute_dtype)
    return RunPlan(spec, found.workload, backend, found.compute_dtype, params, tuple(found.notes))


# One convention for warm and cold steps alike (docs/engine.md, "What a GPU step's time is").
GPU_TIMING = (
    "each step starts on an idle GPU (the previous step, and a cold step's flush, waited for): "
    "its time runs from the start event to its last kernel, host dispatch of each op included"
)

FP32_TF32 = "TF32 for float32 matmuls and convolutions (cuBLAS, cuDNN and inductor's templates)"
FP32_IEEE = (
    "IEEE float32 for matmuls and convolutions (tf32=off; torch's own default lets cuDNN "
    "convolutions use TF32)"
)


def _rocm_tf32(spec: RunSpec) -> dict[str, Any]:
    """On an AMD GPU (torch's ROCm build) with TF32 asked: whether hipBLASLt may use it."""
    if not (spec.tf32 and spec.backend == "torch" and spec.device.startswith("cuda")):
        return {}
    from gpuplay.core.hw import amd

    if amd.rocm_torch() is None:
        return {}
    return {"hipblaslt_allow_tf32": amd.hipblaslt_tf32_condition(os.environ)}


def conditions(plan: RunPlan) -> dict[str, Any]:
    """The settings a result is reported with: library, device, precision, threads, timer."""
    from gpuplay.core.backends.numpy_backend import blas_threads

    spec, backend = plan.spec, plan.backend
    counts: dict[str, Any] = {}
    with contextlib.suppress(Exception):
        counts = dict(backend.thread_counts())
    # NumPy's own counts hold numpy_blas already: threadpoolctl's scan of the loaded libraries
    # costs a few ms (more on a loaded machine), once a run is enough.
    blas = counts.pop("numpy_blas") if "numpy_blas" in counts else blas_threads()
    threads: dict[str, Any] = {"cores": cpu_count(), "numpy_blas": blas, **counts}
    device_name = cpu_name() if spec.device == "cpu" else backend.device_name(spec.device)
    # torch's timer_name says CUDA, HIP (ROCm), XPU or MPS events; CuPy's steps are CUDA-event timed
    timer = "CUDA events" if spec.device.startswith("cuda") else "perf_counter_ns (synchronous)"
    if hasattr(backend, "timer_name"):
        timer = backend.timer_name(spec.device)
    return {
        "backend": backend.name,
        "backend_version": backend.version(),
        "device": spec.device,
        "device_name": device_name,
        "dtype": spec.dtype,
        "compute_dtype": plan.compute_dtype,
        **levers.conditions(spec),  # the torch levers the table marks `condition`
        "transfers_timed": plan.timed_transfers,
        "cache": "warm: steps run back to back, data may stay cache-resident"
        if spec.cache == "warm"
        else "cold",
        "threads": threads,
        "timer": timer,
        **({"timing": GPU_TIMING} if spec.device.startswith("cuda") else {}),
        **(
            {"fp32_precision": FP32_TF32 if spec.tf32 else FP32_IEEE}
            if spec.backend == "torch" and spec.device.startswith("cuda")
            else {}
        ),
        **_rocm_tf32(spec),
        "warmup": spec.warmup,
        "compile_time_excluded": spec.compile != "off",
        "versions": provenance.versions(spec.device),  # what `compare --from` holds two files against
    }
