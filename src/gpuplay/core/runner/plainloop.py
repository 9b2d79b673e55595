"""Which host allocation mode a plain loop in a fresh process lands in, and its figure, asked of a fresh process.

A user's own timing is a fresh `python` process: the inputs made, three warm-up calls, a loop.
Whether its large outputs reuse freed heap pages or fault them in again every step depends on
glibc's state in that process (its mmap threshold rises, and its trim threshold with it, only
after a large block is freed; a free at the top of the heap past the trim threshold returns the
pages; a live block above the step's memory pins the top), not on the code alone. A long-lived
engine meets a different state: measured on the 2-core CI machine, `elementwise` torch 4M
float32 faulted ~15,600 pages per step in 9 of 10 fresh plain loops and 0 in the engine, where
the check's cached float64 reference (32 MB, computed during the set-up) and earlier runs' blocks
pin the heap's top; heat torch 512² (100 stencil iterations, each allocating its temporaries
inside the step) faulted 11,000–33,000 pages a step in fresh processes and 5,000–19,600 in the
engine, a state no trim between steps reproduces. Rather than model glibc, the run asks: a child
process runs the same kernel on inputs made the same way (float64 from the seed, converted, the
float64 dropped), warms up, and times steps for the run's budget with `perf_counter()`, each
step's page faults counted. Where its steps fault unlike the engine's, its times are the
headline (runner/measure.py).

The mode is read from the median step's faults, not the mean: a fresh fft2d torch 1024² loop
faults its 16 MiB in for its first 1 to 20+ steps and then reuses the pages (5 of 5 fresh
processes: 1–3 cold steps, then 397+ warm), so the mean of 20 steps read 4,070 faults a step in
3 of 8 processes while the median step of a second's loop faulted none.

The child is gpuplay.core.workloads.plainloop: it imports the workloads and the array library,
nothing of the runner, as a user's script imports nothing of gpuplay's harness.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from gpuplay.core.spec import RunSpec

CHILD_TIMEOUT_S = 60.0  # a torch import on a loaded 2-core machine takes several seconds
MAX_STEPS = 10_000  # what comes back is one JSON line: 10,000 steps' times and faults, ~300 KB
MAX_STEP_S = 1e6  # a step's time read back is finite and bounded


def plain_loop(
    spec: RunSpec, budget_s: float, cancel: threading.Event, max_steps: int,
    timeout_s: float = CHILD_TIMEOUT_S,
) -> dict[str, Any] | None:  # fmt: skip
    """Run `plain_loop` in a fresh process for `budget_s` of steps (at most `max_steps`); its
    figures, or None where it could not say (no child, cancelled, past `timeout_s` plus the
    budget, unreadable output)."""
    env = os.environ.copy()
    if spec.threads:  # as a user limits a BLAS's threads, and as the run's own process did
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(spec.threads)
    max_steps = max(1, min(MAX_STEPS, max_steps))
    cmd = [sys.executable, "-m", "gpuplay.core.workloads.plainloop", json.dumps(spec.to_dict()),
           repr(float(budget_s)), str(max_steps)]  # fmt: skip
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, text=True)  # fmt: skip
    except OSError:
        return None
    deadline = time.monotonic() + timeout_s + budget_s
    out: list[str] = []
    reader = threading.Thread(
        target=lambda: out.append(child.stdout.read() if child.stdout else ""), daemon=True
    )
    reader.start()  # read as it writes: ~300 KB of steps would fill the pipe and stall the child
    try:
        while child.poll() is None:
            if cancel.is_set() or time.monotonic() > deadline:
                return None
            cancel.wait(0.02)
        reader.join(5)
    finally:
        if child.poll() is None:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)
        reader.join(5)
        if child.stdout:
            child.stdout.close()
    return _reading(out[0] if out else "") if child.returncode == 0 else None


def _reading(out: str) -> dict[str, Any] | None:
    """The child's last line as figures; None for anything but finite, bounded times and counts,
    one count a step."""
    try:
        line = json.loads(out.strip().splitlines()[-1])
        samples = [float(t) for t in line["samples_s"]]
        faults = [int(f) for f in line["faults"]]
    except (ValueError, KeyError, IndexError, TypeError, OverflowError):
        return None
    if not samples or len(samples) != len(faults) or len(samples) > MAX_STEPS:
        return None
    if not all(0 < t < MAX_STEP_S for t in samples) or not all(0 <= f < 10**9 for f in faults):
        return None
    ordered = sorted(faults)
    return {"faults_per_step": float(ordered[len(ordered) // 2]),
            "mean_faults_per_step": round(sum(faults) / len(faults), 1),
            "steps": len(samples), "samples_s": samples}  # fmt: skip
