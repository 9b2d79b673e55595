"""Inputs and float64 references.

Inputs are made as a user's script makes them: generated in float64 from the
seed, converted to the run's dtype on its device, and the float64 arrays
dropped. They are not cached: holding them through the timed loop changed
the process's allocator state (glibc's dynamic mmap/trim thresholds rise
only when a large block is freed), which put NumPy's heat equation into a
heap-trimming mode 2.5-3.5x slower than the same code in a plain script.
Regenerating from the seed gives the same values for every backend of a
compare at a small fraction of a run's cost. References (an expensive
float64 computation) are cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuplay.core.runner.plan import RunPlan
from gpuplay.core.workloads.base import Workload


class LRU:
    """A small thread-safe least-recently-used cache."""

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

    def has(self, key: Any) -> bool:
        with self.lock:
            return key in self.data

    def put(self, key: Any, value: Any) -> None:
        with self.lock:
            self.data[key] = value
            self.data.move_to_end(key)
            while len(self.data) > self.size:
                self.data.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


_reference_cache = LRU(4)


def host_inputs(workload: Workload, p: dict[str, Any], seed: int) -> tuple[np.ndarray, ...]:
    """The workload's float64 host inputs for `seed` (freshly generated, the same every time)."""
    return tuple(workload.inputs(p, np.random.default_rng(seed)))


def device_inputs(
    plan: RunPlan, on_host: Callable[[tuple[np.ndarray, ...]], object] | None = None
) -> tuple[Any, ...]:
    """The step's arguments in the run's dtype on its device; the float64 originals are freed.
    `on_host` sees the float64 originals first (the check's reference is computed from them)."""
    spec, backend = plan.spec, plan.backend
    hosts = list(host_inputs(plan.workload, plan.params, spec.seed))
    if on_host is not None:
        on_host(tuple(hosts))
    args = []
    while hosts:  # convert and drop one by one, as `x = rng.random(...).astype(...)` would
        args.append(backend.from_host(hosts.pop(0), spec.device, spec.dtype))
    # One-off preparation outside the timing (a CSR matrix, a model, pinned buffers).
    return plan.workload.prepare(backend.name, spec.device, tuple(args), plan.params)


def transfer_inputs(plan: RunPlan) -> tuple[np.ndarray, ...]:
    """Host arrays in the dtype a timed upload starts from (for runs that time transfers)."""
    dtype = host_dtype(plan.spec.dtype)
    return tuple(
        np.ascontiguousarray(a, dtype=dtype) for a in host_inputs(plan.workload, plan.params, plan.spec.seed)
    )


def host_dtype(dtype: str) -> Any:
    # NumPy has no bfloat16: bf16 transfers move float32 host data and convert on the device.
    return {"float64": np.float64, "float32": np.float32, "float16": np.float16}.get(dtype, np.float32)


def _reference_key(workload: Workload, p: dict[str, Any], seed: int) -> Any:
    return (workload.cache_key, tuple(sorted(p.items())), seed)  # a user's edited file: a new key


def reference(workload: Workload, p: dict[str, Any], seed: int) -> np.ndarray:
    """The float64 reference output for these parameters and seed (cached)."""
    key = _reference_key(workload, p, seed)
    return _reference_cache.get(key, lambda: workload.reference(p, host_inputs(workload, p, seed)))


def prime_reference(workload: Workload, p: dict[str, Any], seed: int, hosts: tuple[np.ndarray, ...]) -> None:
    """Compute and cache the reference from `hosts`, the float64 inputs a run's set-up just made
    (the same values `reference` would generate again: ~25 ms for a 1024² matmul's two inputs).
    The reference sees read-only views of them, so one that writes into them fails here instead
    (the check then computes it from fresh inputs, as before), and one that is a view of them is
    copied: the run's own inputs may be those very arrays. Views, not the arrays' own flags: an
    input that is a view of another (a transpose beside its matrix) could not be made writeable
    again while its base is read-only, and the run needs its inputs as they were."""
    key = _reference_key(workload, p, seed)
    if _reference_cache.has(key):
        return
    try:
        views = tuple(_read_only(h) for h in hosts)
        value = workload.reference(p, views)
    except Exception:  # the check meets the same failure and reports it
        return
    if isinstance(value, np.ndarray) and any(np.may_share_memory(value, h) for h in hosts):
        value = np.array(value, copy=True)
    _reference_cache.put(key, value)


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False  # the view's flag only: `a` and its base keep theirs
    return view


def clear_caches() -> None:
    _reference_cache.clear()
