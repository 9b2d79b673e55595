"""What each panel shows, worked out from the session as plain data (no widgets, no Textual).

The app passes these straight to the widgets' `show` methods; tests call them directly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

from gpuplay.core.engine.devicelock import is_busy_message
from gpuplay.core.hw import nvidia as gpm
from gpuplay.core.measure.energy import energy_of
from gpuplay.core.measure.stats import PairedSpeedup
from gpuplay.core.reports.report import fmt_time, gpu_activity, peak_memory_text, split_note
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.safetext import visible
from gpuplay.core.studies.compare import baseline_spec, is_baseline
from gpuplay.core.studies.session import LiveSession
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import ITEMSIZE
from gpuplay.core.workloads.usercode import is_code_ref


@dataclass(frozen=True)
class SpeedupView:
    speedup: float | None
    note: str
    marker: str = ""  # "~" when the figure should not be read as printed
    reason: str = ""  # why, in words (the stats panel's "⚠ speedup" line and the tooltip)
    short: str = ""  # why, in a few words under the digits


def speedup_view(session: LiveSession, baseline_problem: str = "") -> SpeedupView:
    """The big number: this configuration's median against NumPy on the CPU; where there is
    none, why, in words, in its place (it stays on screen, unlike a notification).

    `baseline_problem`: why the NumPy baseline of this configuration could not run, if it did not.
    """
    spec, summary = session.spec, session.timed_summary()
    if spec is not None and is_baseline(spec):
        return SpeedupView(1.0 if summary else None, "this is the baseline")
    paired = PairedSpeedup.from_dict(session.speedup_for(spec))
    record = session.speedup_for(spec) or {}
    if paired is not None and summary is not None:
        interval = f"95% {paired.low:.3g}–{paired.high:.3g}×, " if paired.interval else ""
        base_s = record.get("baseline_median_s")
        base = f"NumPy {record.get('baseline_dtype', '?')} {fmt_time(base_s if isinstance(base_s, float) else None)}"
        cand_s = record.get("candidate_median_s")
        if isinstance(cand_s, float) and isinstance(base_s, float):
            # The medians of these very pairs: the speedup's own, not the run's median above it.
            note = f"({interval}{paired.pairs} pairs, their medians: this {fmt_time(cand_s)}, {base})"
        else:
            note = f"({interval}{paired.pairs} pairs with {base})"
        reasons = [paired.reason()] if paired.wide else []
        shorts = [("too few pairs" if paired.interval is None else "wide interval")] if paired.wide else []
        live = session.live_result
        if live is not None and live.spec == spec and (live.unstable or live.noise_warnings):
            reasons.append("the noise check fired during this run")
            shorts.append("noisy run")
        against = _medians_disagree(paired, summary.median, base_s if isinstance(base_s, float) else None)
        if against:
            reasons.append(against)
            shorts.append("the medians shown point the other way")
        reason = "; ".join(r for r in reasons if r)
        return SpeedupView(paired.point, note, "~" if reason else "", reason, ", ".join(shorts))
    if session.baseline_running:
        return SpeedupView(None, "measuring the speedup: paired with NumPy on the CPU…")
    return SpeedupView(None, missing_speedup_reason(session, baseline_problem))


def _medians_disagree(paired: PairedSpeedup, median_s: float, base_s: float | None) -> str:
    """Why the paired speedup and the two medians on screen point different ways, or ''.

    The big number is the median of per-pair ratios (each step timed beside a NumPy step); the
    medians beside it are each run's own. On a machine whose load changed they can disagree in
    direction (9.63 ms against NumPy's 6.99 ms, shown as ~1.05×): say which is which, and why.
    """
    if not base_s or not median_s or base_s <= 0 or median_s <= 0:
        return ""
    shown = base_s / median_s
    if (paired.point - 1.0) * (shown - 1.0) >= 0:
        return ""
    return (
        f"{paired.point:.3g}× is the median of {paired.pairs} paired ratios (each step timed beside a NumPy "
        f"step); the medians shown, {fmt_time(median_s)} here and {fmt_time(base_s)} for NumPy, read "
        f"{shown:.3g}×, the other way: the machine's load changed between the runs; rerun (r) when it is quiet"
    )


def missing_speedup_reason(session: LiveSession, baseline_problem: str) -> str:
    """Why there is no speedup to show, for the place where it would be."""
    spec, r = session.spec, session.live_result
    if spec is None or session.phase in MEASURING_PHASES:
        return ""
    if r is not None and r.status != "ok":
        return "no speedup: this configuration did not run (see the status)"
    if baseline_problem:
        return f"no speedup: NumPy on the CPU could not run the baseline: {baseline_problem}"
    try:
        baseline_spec(spec)
    except (KeyError, ValueError):
        return "no speedup: NumPy has no version of this workload to compare with"
    if not session.autostart:
        return "no speedup yet: press r to measure this and NumPy on the CPU"
    return ""


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
    # A wait for the device names another session's command: said even before the probe, as text.
    phase = (
        session.phase
        if probed or is_busy_message(session.phase)
        else "starting the engine (it imports torch)…"
    )
    return visible(phase, one_line=True) + (" (paused)" if paused else "")


def stats_info(session: LiveSession) -> dict[str, Any]:
    """Everything the stats panel needs beyond the running summary."""
    r, spec = session.live_result, session.spec
    info: dict[str, Any] = dict(zip(("flops", "bytes"), step_cost(spec))) if spec else {}
    if r is not None:
        info.update(
            result=r if r.error is not None else None,
            conditions=r.conditions,
            compile_s=r.compile_s,
            build_s=r.build_s,
            split=split_note(r.split, r.median) if r.split else "",
            notes=r.notes,
            message=r.message if r.status in ("failed", "refused") else "",
            roof=r.roof_fields(),
            noise=r.noise_warnings,
            other_mode=r.other_mode if r.spec == spec else None,
            fresh_spread=r.fresh_spread if r.spec == spec else None,
        )
        info["speedup_reason"] = speedup_view(session).reason
        e = energy_of(r.telemetry)
        if e is not None:
            info["energy"] = e.text().removeprefix("energy: ")
        info.update(activity_info(session, r))
        if r.peak_memory:  # the run's own, from the library's allocator (GPU runs)
            info["peak_memory"] = peak_memory_text(r).removeprefix("peak memory ")
        info["flops"], info["bytes"] = r.flops or info.get("flops"), r.bytes or info.get("bytes")
    compile_s = session.compile_seconds()
    if compile_s is not None:
        info["compile_s"] = compile_s
    return info


def activity_info(session: LiveSession, r: RunResult) -> dict[str, str]:
    """GPM over the run's timed steps, and after an AMP or TF32 flip whether tensor cores got busier
    (against the latest kept result that differs from this one in that lever alone)."""
    now = gpu_activity(r.telemetry)
    if now is None:
        return {}
    out = {"activity": gpm.summary(now) or str(now.get("reason") or "")}
    for before in reversed(session.results):
        if before is r:
            continue
        flipped = _flip(before.spec, r.spec)
        if flipped:
            change = gpm.activity_change(now, gpu_activity(before.telemetry), flipped)
            if change:
                out["activity_change"] = change
            break
    return out


def _flip(before: RunSpec, now: RunSpec) -> str:
    """'AMP off → bf16' when the two specs differ in AMP or TF32 only; else ''."""
    if before == now or dataclasses.replace(before, amp=now.amp, tf32=now.tf32) != now:
        return ""
    if before.amp != now.amp:
        return f"AMP {before.amp} → {now.amp}"
    return f"TF32 {'on' if before.tf32 else 'off'} → {'on' if now.tf32 else 'off'}"


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


@dataclass(frozen=True)
class TelemetryPace:
    """How often telemetry is sampled and redrawn (seconds)."""

    sample_s: float
    panel_s: float
    chart_s: float


MEASURING_PHASES = ("queued", "compile", "warmup", "timed")


def telemetry_pace(session: LiveSession, sample_interval: float) -> TelemetryPace:
    """While a measurement runs, every sample is shown (what the run does to the machine);
    idle, 1 Hz sampling, the figures every 2 s and the chart every 10 s: the UI's own cost
    (CPU, and bytes to the terminal over SSH) must stay small when nothing happens."""
    if session.phase in MEASURING_PHASES or session.baseline_running:
        return TelemetryPace(sample_interval, 0.0, 1.0)
    return TelemetryPace(max(sample_interval, 1.0), 2.0, 10.0)


# The Compare table's columns, most important first: it exists for the speedup and the error,
# so those stay beside the configuration at any width; the rest go, from the end, when the
# table is narrower than their natural width.
# What identifies a row (the scenario and its size, one column) is kept before the secondary
# columns: at 80×24 "torch cpu 0.869×" and "torch cpu 1.57×" of matmul 1024² and SVD 384² read
# alike once it was the first to go.
# The run's own peak device memory and its tensor-core activity over the timed steps (GPM,
# issues 32 and 37) come last: secondary, the first to go at 80×24, and left out altogether
# when no row has one (a CPU-only session's table is as it was).
COMPARE_COLUMNS = (
    "configuration",
    "speedup",
    "error",
    "scenario",
    "median",
    "±",
    "compute",
    "peak mem",
    "tensor",
)
COMPARE_OPTIONAL = ("peak mem", "tensor")
COMPARE_KEPT = 4  # configuration, speedup, error, scenario (with its size): never dropped
COMPARE_ESSENTIAL = 6  # ... then median and ±, before the configuration gets its full width
MAX_SCENARIO = 20  # a longer scenario · size is shortened with … (its size stays readable first)
MIN_CONFIGURATION = 12  # below this the configuration is shortened (with …), not other columns dropped
# A label is what tells rows apart ("torch bfloat16" from "torch float64"): up to this width it is
# kept whole before median and ± are added (at 80 columns they then give way to it).
LABEL_KEPT = 24
MAX_CONFIGURATION = 44
CELL_PADDING = 2  # DataTable pads each cell by one column on both sides


def baseline_dtype(spec: RunSpec | None) -> str:
    """The dtype of the NumPy run a configuration's speedup is over: its own where NumPy has it
    (a float64 torch run against NumPy float64), else float32 ('' when there is none)."""
    if spec is None:
        return ""
    try:
        return baseline_spec(spec).dtype
    except (KeyError, ValueError):
        return ""


def baseline_words(spec: RunSpec | None) -> str:
    """'NumPy on the CPU', or 'NumPy float64 on the CPU' where the speedup is not over float32."""
    dtype = baseline_dtype(spec)
    return "NumPy on the CPU" if dtype in ("", "float32") else f"NumPy {dtype} on the CPU"


def compare_cells(row: Any, label: str | None = None) -> dict[str, str]:
    """One Compare row's cells, by column name; `label` tells the row from the others
    (rowlabels.distinct_labels), the configuration's full label without it."""
    from gpuplay.core.reports.report import fmt_error, fmt_speedup

    r, s = row.result, row.result.summary
    tensor = _tensor_active(r.telemetry)
    return {
        "configuration": label if label is not None else r.spec.label(with_dtype=False),
        "speedup": getattr(row, "speedup_marker", "") + fmt_speedup(row.speedup),  # "~": see the notes
        "error": fmt_error(r),
        "median": fmt_time(s.median if s else None),
        "±": f"±{100 * s.rel_iqr / 2:.1f}%" if s and math.isfinite(s.rel_iqr) else "—",
        "compute": str(r.compute_dtype or "—"),
        "scenario": f"{short_size(r.size)} {r.spec.scenario or r.spec.workload}"
        if r.size
        else str(r.spec.scenario or r.spec.workload),
        "peak mem": _peak_memory_cell(r.peak_memory),
        "tensor": "—" if tensor is None else f"{tensor:.0f} %",
    }


MAX_PEAK_BYTES = 2**60  # core/result.peak_memory_of's bound: beyond it a figure is a glitch


def _peak_memory_cell(peak: Any) -> str:
    """'1.25 GiB' from a run's own peak record; '—' without one or with a figure not to be shown
    (NaN, negative, absurd: a result may come from a hand-edited file)."""
    from gpuplay.core.backends.oom import fmt_bytes

    n = peak.get("bytes") if isinstance(peak, dict) else None
    if (
        isinstance(n, bool)
        or not isinstance(n, int | float)
        or not math.isfinite(n)
        or not 0 <= n < MAX_PEAK_BYTES
    ):
        return "—"
    return fmt_bytes(n)


def _tensor_active(telemetry: Any) -> float | None:
    """Tensor-core activity % over the timed steps, where GPM gave it (bounded to 0–100)."""
    activity = gpu_activity(telemetry) if isinstance(telemetry, dict) else None
    if not activity or activity.get("reason"):
        return None
    v = activity.get("tensor_active")
    return None if isinstance(v, bool) else gpm.bounded("tensor_active", v)  # True is not "1 %"


def short_size(size: str | None) -> str:
    """'1024×1024' → '1024²': a square's size in the few cells a narrow table has."""
    parts = str(size or "").split("×")
    if len(parts) == 2 and parts[0] == parts[1]:
        return f"{parts[0]}²"
    return str(size or "")


def fit_columns(cells: list[dict[str, str]], width: int) -> list[tuple[str, int]]:
    """The columns that fit in `width` terminal columns, with their widths.

    The first COMPARE_KEPT always (the scenario with its size among them); then median and ±
    while the configuration keeps MIN_CONFIGURATION; the configuration then grows to its natural
    width (up to MAX_CONFIGURATION) before compute, peak memory and tensor-core activity are
    added (those two only when a row has a figure). A configuration
    narrower than its text is shortened with an ellipsis (ellipsize)."""
    # A secondary column no row has a figure for is not offered at all.
    offered = tuple(
        n for n in COMPARE_COLUMNS if n not in COMPARE_OPTIONAL or any(c.get(n, "—") != "—" for c in cells)
    )
    natural = {name: max([len(name), *(len(c.get(name, "—")) for c in cells)]) for name in offered}
    natural["scenario"] = min(natural["scenario"], MAX_SCENARIO)
    config_natural = min(natural["configuration"], MAX_CONFIGURATION)

    def fixed(names: list[str]) -> int:
        return sum(natural[n] + CELL_PADDING for n in names if n != "configuration") + CELL_PADDING

    order: tuple[str, ...] = offered
    kept, essential = COMPARE_KEPT, COMPARE_ESSENTIAL
    if len({c["scenario"] for c in cells}) <= 1:
        # One scenario and size for every row: the column tells rows nothing (the chart's title
        # names it), so it goes last and the configuration keeps the room.
        order = (*(n for n in offered if n != "scenario"), "scenario")
        kept, essential = COMPARE_KEPT - 1, COMPARE_ESSENTIAL - 1
    chosen = list(order[:kept])
    for i, name in enumerate(order[kept:], kept):
        wanted = max(MIN_CONFIGURATION, min(config_natural, LABEL_KEPT)) if i < essential else config_natural
        if fixed([*chosen, name]) + min(wanted, config_natural) > width:
            break
        chosen.append(name)
    config_w = max(min(config_natural, width - fixed(chosen)), min(MIN_CONFIGURATION, config_natural))
    return [(n, config_w if n == "configuration" else natural[n]) for n in chosen]


def ellipsize(text: str, width: int) -> str:
    """`text` in at most `width` columns, its end replaced by … when cut."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
