"""Which host allocation mode a plain loop in a fresh process lands in, asked of a fresh process.

A user's own timing is a fresh `python` process: the inputs made, three warm-up calls, a loop.
Whether its large outputs reuse freed heap pages or fault them in again every step depends on
glibc's state in that process (its mmap threshold rises, and its trim threshold with it, only
after a large block is freed; a free at the top of the heap past the trim threshold returns the
pages; a live block above the step's memory pins the top), not on the code alone. A long-lived
engine meets a different state: measured on the 2-core CI machine, `elementwise` torch 4M
float32 faulted ~15,600 pages per step in 9 of 10 fresh plain loops and 0 in the engine, where
the check's cached float64 reference (32 MB, computed during the set-up) and earlier runs' blocks
pin the heap's top. Rather than model glibc, the run asks: a child process runs the same kernel
on inputs made the same way (float64 from the seed, converted, the float64 dropped), warms up,
and counts the minor page faults of a few steps. The child times nothing that is reported.

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
MAX_STEPS = 30


def plain_loop_faults(
    spec: RunSpec, steps: int, cancel: threading.Event, timeout_s: float = CHILD_TIMEOUT_S
) -> dict[str, Any] | None:
    """Run `plain_loop` in a fresh process; its figures, or None where it could not say."""
    steps = max(10, min(MAX_STEPS, steps))
    env = os.environ.copy()
    if spec.threads:  # as a user limits a BLAS's threads, and as the run's own process did
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(spec.threads)
    cmd = [sys.executable, "-m", "gpuplay.core.workloads.plainloop", json.dumps(spec.to_dict()), str(steps)]
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, env=env, text=True)  # fmt: skip
    except OSError:
        return None
    deadline = time.monotonic() + timeout_s
    try:
        while child.poll() is None:
            if cancel.is_set() or time.monotonic() > deadline:
                return None
            cancel.wait(0.02)
        out = child.stdout.read() if child.stdout else ""
    finally:
        if child.poll() is None:
            child.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(5)
        if child.stdout:
            child.stdout.close()
    return _reading(out, steps) if child.returncode == 0 else None


def _reading(out: str, steps: int) -> dict[str, Any] | None:
    """The child's last line as figures; None for anything but one bounded, finite count."""
    try:
        faults = float(json.loads(out.strip().splitlines()[-1])["faults_per_step"])
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    if not (0 <= faults < 1e9):
        return None
    return {"faults_per_step": round(faults, 1), "steps": steps}
