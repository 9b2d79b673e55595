"""The timed loop: call the step until a count, a time budget or a cancel.

A step's interval is what `timeit` and `blocked_autorange` time: the call and
the release of its result (the result's last reference dies as the call
returns). Freeing is part of a step's cost: NumPy returning a large array to
glibc may trim the heap, and the next step page-faults it back in. Only one
output is ever alive, and the loop's own bookkeeping runs after the free,
between steps, as timeit's does. The loop keeps no output: the accuracy check
calls the step once more after the timed phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplay.core.backends.base import StepTimer

SampleCallback = Callable[[str, float], None]
PhaseCallback = Callable[[str, str], object]  # the return value is ignored


class Cancelled(Exception):
    """The user cancelled the run between two steps."""


@dataclass
class LoopOutcome:
    samples: list[float]
    cancelled: bool


def _wait_while_paused(pause: threading.Event | None, cancel: threading.Event) -> None:
    while pause is not None and pause.is_set() and not cancel.is_set():
        cancel.wait(0.05)


def timed_loop(
    fn: Callable[[], Any],
    timer: StepTimer,
    *,
    phase: str,
    count: int | None,
    budget_s: float | None = None,
    min_count: int = 1,
    max_count: int = 1_000_000,
    cancel: threading.Event,
    pause: threading.Event | None = None,
    on_sample: SampleCallback | None = None,
    between: Callable[[], object] | None = None,
) -> LoopOutcome:
    """Time `fn` step by step until `count` steps, or `budget_s` and `min_count`, or cancel.

    Inside the measured interval: `fn()` and the release of its output. The
    cancel, pause and budget checks, the callback and `between` (a cache flush, the cold
    allocation mode's page return) run between steps.
    """
    samples: list[float] = []
    append = samples.append

    def step() -> None:
        fn()  # the output is released here, inside the interval

    deadline = None if budget_s is None else time.perf_counter() + budget_s
    n = 0
    is_cancelled = cancel.is_set
    cancelled = False
    while True:
        if count is not None and n >= count:
            break
        if count is None and n >= min_count and (deadline is None or time.perf_counter() >= deadline):
            break
        if n >= max_count:
            break
        if is_cancelled():
            cancelled = True
            break
        if pause is not None and pause.is_set():
            _wait_while_paused(pause, cancel)
            continue
        if between is not None:
            between()
        dt = timer(step)[0]
        append(dt)
        n += 1
        if on_sample is not None:
            on_sample(phase, dt)
    return LoopOutcome(samples, cancelled)
