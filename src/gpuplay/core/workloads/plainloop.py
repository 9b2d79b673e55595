"""A user's plain loop over a workload's kernel, in the fresh process it is run as (runner/plainloop.py).

    python -m gpuplay.core.workloads.plainloop '<spec JSON>' <budget seconds> <max steps>

Inputs made as a user's script makes them (float64 from the seed, converted to the run's dtype
one by one, the float64 dropped), the warm-up calls, then steps for the budget (at least
MIN_STEPS, at most max steps), each timed with `perf_counter()` as a user times it: every step's
time and minor page faults on stdout as one JSON line. Imports the workloads and the array
library only.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from gpuplay.core.spec import RunSpec

MIN_STEPS = 10


def _faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def plain_loop(spec: RunSpec, budget_s: float, max_steps: int) -> dict[str, Any]:
    """In this (fresh) process: a user's loop over the kernel; each step's time and faults."""
    import numpy as np

    from gpuplay.core.workloads import get_workload

    w = get_workload(spec.workload)
    p = w.effective(w.resolve(spec.params), spec.backend, spec.dtype)
    hosts = list(w.inputs(p, np.random.default_rng(spec.seed)))
    args: list[Any] = []
    if spec.backend == "torch":
        import torch

        if spec.threads:
            torch.set_num_threads(spec.threads)
        xp: Any = torch
        while hosts:  # x = torch.from_numpy(rng.random(n)).to(torch.float32), one by one
            args.append(torch.from_numpy(np.ascontiguousarray(hosts.pop(0))).to(getattr(torch, spec.dtype)))
    else:
        xp = np
        while hosts:
            args.append(np.ascontiguousarray(hosts.pop(0), dtype=getattr(np, spec.dtype)))
    prepared = w.prepare(spec.backend, "cpu", tuple(args), p)
    del args
    kernel = w.kernel(spec.backend, xp, p)
    for _ in range(spec.warmup):
        kernel(*prepared)
    times: list[float] = []
    faults: list[int] = []
    end = time.perf_counter() + budget_s
    while len(times) < max_steps and (len(times) < MIN_STEPS or time.perf_counter() < end):
        f0 = _faults()
        t0 = time.perf_counter()
        kernel(*prepared)  # the output is dropped here, as a loop that keeps nothing drops it
        times.append(time.perf_counter() - t0)
        faults.append(_faults() - f0)
    return {"samples_s": times, "faults": faults}


def main(argv: list[str]) -> int:
    spec = RunSpec.from_dict(json.loads(argv[1]))
    print(json.dumps(plain_loop(spec, float(argv[2]), int(argv[3]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
