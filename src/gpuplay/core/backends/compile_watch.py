"""What torch.compile really did, read from dynamo's own counters.

A compiled callable can silently run eager: every frame of it may fall back (nothing
traceable), a graph break may leave part of it eager, and a function recompiled past
dynamo's recompile limit runs eager from then on. None of these raises. The runner
reads the counters (torch._dynamo.utils.counters) around the compiling call and around
warm-up and timing, and reports what they show; a fallback is never timed as compiled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DynamoCounts:
    frames: int = 0  # frames dynamo was asked to compile
    graphs: int = 0  # distinct FX graphs it produced
    graph_breaks: int = 0
    limit_hits: int = 0  # frames that hit the recompile limit (then run eager for good)
    break_reasons: tuple[str, ...] = field(default=(), compare=False)


def read_counters(counters: Mapping[str, Mapping[str, int]]) -> DynamoCounts:
    """The figures gpuplay needs from torch._dynamo.utils.counters (a dict of Counters)."""
    breaks = counters.get("graph_break", {})
    unimplemented = counters.get("unimplemented", {})
    limit = sum(int(v) for k, v in unimplemented.items() if "recompile limit" in str(k).lower())
    limit += sum(int(v) for k, v in breaks.items() if "recompile limit" in str(k).lower())
    return DynamoCounts(
        frames=int(counters.get("frames", {}).get("total", 0)),
        graphs=int(counters.get("stats", {}).get("unique_graphs", 0)),
        graph_breaks=sum(int(v) for v in breaks.values()),
        limit_hits=limit,
        break_reasons=tuple(str(k).strip().splitlines()[0][:200] for k in breaks if str(k).strip()),
    )


@dataclass
class CompileFindings:
    notes: list[str] = field(default_factory=list)
    fallback: str = ""  # why the step is eager after all; '' when it is compiled
    graph_breaks: int = 0
    recompiles: int = 0


def after_first_call(before: DynamoCounts, after: DynamoCounts) -> CompileFindings:
    """What the compiling call did: a graph, graph breaks, or nothing (an eager fallback)."""
    out = CompileFindings(graph_breaks=max(0, after.graph_breaks - before.graph_breaks))
    if after.limit_hits > before.limit_hits:
        out.fallback = "dynamo hit its recompile limit, so the step runs eager"
    elif after.graphs <= before.graphs:
        out.fallback = "dynamo captured no graph (every frame fell back to eager)"
    if out.graph_breaks and not out.fallback:
        new = [r for r in after.break_reasons if r not in before.break_reasons][:1]
        out.notes.append(
            f"torch.compile: {out.graph_breaks} graph break(s), so part of the step runs eager between "
            "compiled graphs" + (f" (first: {new[0]})" if new else "")
        )
    return out


def during_timing(before_warmup: DynamoCounts, before_timed: Any, after: DynamoCounts) -> CompileFindings:
    """Compiles after the first call: the recompile limit's eager fallback (from warm-up on),
    or recompiles inside the timed phase (whose steps then include compile time)."""
    timed_from = before_timed if before_timed is not None else before_warmup
    out = CompileFindings(recompiles=max(0, after.frames - timed_from.frames))
    if after.limit_hits > before_warmup.limit_hits:
        out.fallback = "dynamo hit its recompile limit after the first call, so the timed steps ran eager"
    elif out.recompiles:
        out.notes.append(
            f"torch.compile recompiled {out.recompiles} frame(s) during the timed steps (a guard failed); "
            "those steps include the compile time"
        )
    return out
