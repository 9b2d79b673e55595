"""What each panel shows, worked out from the session as plain data (no widgets, no Textual).

The app passes these straight to the widgets' `show` methods; tests call them directly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gpuplay.core.compare import is_baseline
from gpuplay.core.report import fmt_time
from gpuplay.core.safetext import visible
from gpuplay.core.session import LiveSession
from gpuplay.core.spec import RunSpec
from gpuplay.core.usercode import is_code_ref
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import ITEMSIZE


@dataclass(frozen=True)
class SpeedupView:
    speedup: float | None
    note: str


def speedup_view(session: LiveSession) -> SpeedupView:
    """The big number: this configuration's median against NumPy on the CPU."""
    spec, summary = session.spec, session.timed_summary()
    if spec is not None and is_baseline(spec):
        return SpeedupView(1.0 if summary else None, "this is the baseline")
    base = session.baseline_for(spec)
    if base is not None and summary is not None and base.median:
        return SpeedupView(
            base.median / summary.median, f"(NumPy {base.spec.dtype}: {fmt_time(base.median)})"
        )
    if session.baseline_running:
        return SpeedupView(None, "measuring the NumPy baseline…")
    return SpeedupView(None, "")


def size_label(spec: RunSpec) -> str:
    w = get_workload(spec.workload)
    try:
        return w.size_label(w.resolve(spec.params))
    except (KeyError, ValueError):
        return "?"


def chart_title(session: LiveSession) -> str:
    if session.spec is None or session.scenario is None:
        return ""
    return visible(f"{session.scenario.title} · {size_label(session.spec)} · step times", one_line=True)


def phase_line(session: LiveSession, probed: bool, paused: bool) -> str:
    phase = session.phase if probed else "starting the engine (it imports torch)…"
    return phase + (" (paused)" if paused else "")


def stats_info(session: LiveSession) -> dict[str, Any]:
    """Everything the stats panel needs beyond the running summary."""
    r, spec = session.live_result, session.spec
    info: dict[str, Any] = dict(zip(("flops", "bytes"), step_cost(spec))) if spec else {}
    if r is not None:
        info.update(
            result=r if r.error is not None else None,
            conditions=r.conditions,
            compile_s=r.compile_s,
            notes=r.notes,
            message=r.message if r.status in ("failed", "refused") else "",
            roof=r.roof_fields(),
            noise=r.noise_warnings,
        )
        info["flops"], info["bytes"] = r.flops or info.get("flops"), r.bytes or info.get("bytes")
    compile_s = session.compile_seconds()
    if compile_s is not None:
        info["compile_s"] = compile_s
    return info


def compare_focus(spec: RunSpec | None) -> tuple[str, str] | None:
    if spec is None:
        return None
    label = size_label(spec)
    return None if label == "?" else (spec.workload, label)


def code_panes(spec: RunSpec, titles: dict[str, str]) -> tuple[str, str, str, str]:
    """(left title, NumPy source, right title, the chosen backend's source with its levers)."""
    w = get_workload(spec.workload)
    p = w.resolve(spec.params)
    right_backend = spec.backend if spec.backend != "numpy" else "torch"
    levers = []
    if spec.amp != "off" and right_backend == "torch":
        dtype = "bfloat16" if spec.amp == "bf16" else "float16"
        levers.append(f"with torch.autocast('{spec.device.split(':')[0]}', dtype=torch.{dtype}):")
    if spec.compile != "off":
        levers.append(f"kernel = torch.compile(kernel, mode={spec.compile!r})")
    right = _source(w, right_backend, p)
    if levers:
        right += "\n\n# levers applied around the kernel:\n# " + "\n# ".join(levers)
    return (
        "NumPy  (xp = numpy, arrays on the host)",
        _source(w, "numpy", p),
        f"{titles.get(right_backend, right_backend)}  (xp = {right_backend}, device {spec.device})",
        right,
    )


@functools.lru_cache(maxsize=64)
def step_cost(spec: RunSpec) -> tuple[float | None, float | None]:
    """FLOPs and bytes of one step, for the live rates before the run's own figures arrive."""
    if is_code_ref(spec.workload):
        return None, None  # a user's flops() is their code: it runs in the engine, never here
    w = get_workload(spec.workload)
    try:
        p = w.effective(w.resolve(spec.params), spec.backend, spec.dtype)
    except (KeyError, ValueError):
        return None, None
    return w.flops(p), w.bytes_moved(p, ITEMSIZE[spec.dtype])


def _source(w: Any, backend: str, p: dict[str, Any]) -> str:
    """The backend's source, or why this configuration has none (a GPU-only transfer op on NumPy)."""
    try:
        return str(w.source(backend, p))
    except (KeyError, NotImplementedError):
        device = "cpu" if backend == "numpy" else "cuda:0"
        why = w.unsupported(backend, device, "float32", p) or "no version of this configuration"
        return f"# {backend}: {why}"
