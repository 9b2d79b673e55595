"""The timed loop: call the step until a count, a time budget or a cancel.

What a step's interval holds, and why: a user's `timeit(lambda: f(x))` or
`blocked_autorange` drops each call's output inside the timed region (the
result's reference dies as the call returns), so freeing an output is part
of a step's cost: NumPy returning a large array to glibc may trim the heap,
and the next step page-faults it back in. Here the previous step's output is
dropped inside the interval, just before the call, so exactly one output is
alive while the step runs and the loop still ends holding the last output
for the accuracy check.
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
    last: Any
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
) -> LoopOutcome:
    """Time `fn` step by step until `count` steps, or `budget_s` and `min_count`, or cancel.

    Inside the measured interval: freeing the previous output, then `fn()`.
    The cancel, pause and budget checks and the callback run between steps.
    """
    samples: list[float] = []
    append = samples.append
    held: list[Any] = []  # the previous step's output, dropped at the start of the next interval
    drop_previous = held.clear
    keep = held.append

    def step() -> Any:
        drop_previous()
        return fn()

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
        dt, out = timer(step)
        keep(out)
        out = None  # `held` owns the output now: the next interval frees it
        append(dt)
        n += 1
        if on_sample is not None:
            on_sample(phase, dt)
    last = held[0] if held else None
    held.clear()
    return LoopOutcome(samples, last, cancelled)
