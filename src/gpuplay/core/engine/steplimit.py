"""The step limit (`--max-step`, the app's step limit) in words, and a finished result held to it.

A step that runs past its limit is never a normal result: the client's watchdog stops it at the
limit plus a short grace by ending the engine (core/engine/client.Watchdog), and a step that
finished over the limit inside that grace (or in the in-process engine, which nothing can stop)
turns its result into the same failure here (`held_to_limit`), its timings kept for the record.
"""

from __future__ import annotations

import math

from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

STEP_TIMEOUT = "step-timeout"  # RunResult.failure of a step past its limit


def stopped_words(spec: RunSpec) -> str:
    """The opening of every step-limit failure, as the CLI prints it."""
    return f"stopped: a step ran past its limit of {spec.max_step_s:g} s (--max-step)"


def advice(spec: RunSpec) -> str:
    return (
        "choose a smaller size, or raise the step limit (--max-step; in the app, its step limit) above "
        "the step's time if steps this long are what you mean to time"
    )


def held_to_limit(result: RunResult) -> RunResult:
    """`result`, failed with a step-limit message when one of its warm-up or timed steps took
    longer than the spec's limit; unchanged otherwise (a result already failed or cancelled too)."""
    spec = result.spec
    limit = spec.max_step_s
    if result.status != "ok" or not (math.isfinite(limit) and limit > 0):
        return result
    steps = [("warm-up", t) for t in result.warmup] + [("timed", t) for t in result.samples]
    over = [(phase, t) for phase, t in steps if math.isfinite(t) and t > limit]
    if not over:
        return result
    phase, worst = max(over, key=lambda x: x[1])
    result.status, result.failure = "failed", STEP_TIMEOUT
    result.message = (
        f"{stopped_words(spec)}: {spec.label()} at {result.size or 'its size'}, a {phase} step took "
        f"{worst:.3g} s ({len(over)} of {len(steps)} steps over the limit); not reported as a result: "
        f"{advice(spec)}"
    )
    return result
