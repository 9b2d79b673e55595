"""The step limit (`--max-step`, the app's step limit) in words, and a finished result held to it.

A step that runs past its limit is never a normal result: the client's watchdog stops it at the
limit plus a short grace (STEP_GRACE_S) by ending the engine (core/engine/client.Watchdog), and a
result whose steps ran past it anyway (a median over the limit, or a step over the limit and its
grace: the in-process engine stops nothing) turns into the same failure here (`held_to_limit`),
its timings kept for the record.
"""

from __future__ import annotations

import math

from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

STEP_TIMEOUT = "step-timeout"  # RunResult.failure of a step past its limit
# How far past its limit a step may run before it is stopped: one batch of step timings, which
# reach the client at most 0.1 s late (protocol.SAMPLE_BATCH_S), and the client's 0.3 s cancel
# grace (client.CANCEL_GRACE_S). A single step over the limit by less (a scheduler stall of a
# loaded machine: 24 ms in a sweep under a 1 ms limit) is noise; a median over it is not.
STEP_GRACE_S = 0.4


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
    median = result.median
    if not any(t > limit + STEP_GRACE_S for _, t in over) and not (median is not None and median > limit):
        return result
    phase, worst = max(over, key=lambda x: x[1])
    result.status, result.failure = "failed", STEP_TIMEOUT
    typical = f", the median {median:.3g} s" if median is not None and median > limit else ""
    result.message = (
        f"{stopped_words(spec)}: {spec.label()} at {result.size or 'its size'}, a {phase} step took "
        f"{worst:.3g} s{typical} ({len(over)} of {len(steps)} steps over the limit); not reported as a "
        f"result: {advice(spec)}"
    )
    return result
