"""Results as tables, Markdown, CSV and JSON, always with their conditions beside them."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from gpuplay import __version__
from gpuplay.core.backends.oom import fmt_bytes
from gpuplay.core.catalogue import levers
from gpuplay.core.hw import nvidia as gpm
from gpuplay.core.hw.system import host_description, package_version
from gpuplay.core.measure.energy import energy_of
from gpuplay.core.measure.roofline import STALE, roof_cell, roof_text
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.safetext import visible
from gpuplay.core.studies.compare import Row


def fmt_time(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "—"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_rate(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    if x >= 1000:
        return f"{x / 1000:.3g} T{unit}"
    return f"{x:.3g} G{unit}"


def fmt_speedup(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}×" if x >= 100 else f"{x:.3g}×"


def fmt_row_speedup(row: Row, interval: bool = False) -> str:
    """The speedup cell: '~' before a figure not to be read as printed (the reason is in the
    row's notes); with `interval`, its 95% interval after it."""
    text = row.speedup_marker + fmt_speedup(row.speedup)
    iv = row.speedup_interval
    if interval and iv is not None:
        text += f" [{iv[0]:.3g}–{iv[1]:.3g}]"
    return text


def _medians_disagree(row: Row) -> bool:
    """Whether the rows' own medians (measured apart) give a ratio outside the paired speedup's
    interval (or, without one, 10% off its point): then the cell looks contradicted unless the
    medians of the pairs are said beside it."""
    paired, base, r = row.paired, row.baseline, row.result
    if paired is None or base is None or base is r or not base.median or not r.median:
        return False
    if (
        base.conditions.get("paired_with") == r.spec.label()
        and base.started == r.started
        and (r.speedup or {}).get("baseline_median_s") == base.median
    ):
        # The baseline row is the baseline side of these very pairs (their label, start and median;
        # the label alone is any run of that configuration): nothing measured apart.
        return False
    apart = base.median / r.median
    if paired.low is not None and paired.high is not None:
        return not paired.low <= apart <= paired.high
    return abs(apart / paired.point - 1) > 0.1


def paired_medians_note(row: Row) -> str | None:
    """Where the speedup comes from, when the rows' medians would contradict it: the medians of
    the interleaved pairs it was measured in (the candidate's samples are the pairs' own)."""
    if not _medians_disagree(row):
        return None
    record, paired = row.result.speedup or {}, row.paired
    base_s = record.get("baseline_median_s")
    if paired is None or not isinstance(base_s, int | float) or not math.isfinite(base_s) or base_s <= 0:
        return None
    return (
        f"speedup from {paired.pairs} interleaved pairs: NumPy {fmt_time(float(base_s))} vs "
        f"{fmt_time(row.result.median)} in the pairs (the rows' medians were measured apart)"
    )


def fmt_error(r: Any) -> str:
    if r.error is None:
        return "—"
    mark = "✓" if r.check_ok else "✗"
    return f"{r.error:.0e}{mark}" if math.isfinite(r.error) else f"{r.error}✗"


def threads_text(conditions: dict[str, Any]) -> str:
    t = conditions.get("threads") or {}
    parts = []
    if t.get("torch_intraop") is not None and conditions.get("backend") == "torch":
        parts.append(f"torch {t['torch_intraop']}")
    if t.get("numpy_blas") is not None and conditions.get("backend") == "numpy":
        # BLAS/LAPACK calls use the pool; ufuncs, FFT and reductions run on one thread.
        parts.append(f"BLAS {t['numpy_blas']}, ufuncs 1")
    return ", ".join(parts) or "—"


def environment() -> dict[str, Any]:
    env: dict[str, Any] = {"gpuplay": __version__, **host_description()}
    for pkg in ("numpy", "torch", "cupy-cuda12x", "cupy-cuda13x", "nvidia-ml-py"):
        v = package_version(pkg)
        if v:
            env[pkg] = v
    return env


COLUMNS = [
    "scenario",
    "size",
    "configuration",
    "compute",
    "median",
    "IQR",
    "n",
    "GFLOP/s",
    "GB/s",
    "speedup vs NumPy CPU",
    "rel. error",
    "roof",
    "threads",
    "notes",
]


def roof_markdown(roof: dict[str, Any]) -> str:
    """'34% of compute roof (AI 85 FLOP/B, ridge 8.7)'; or why there is no roof."""
    if roof.get("status") == "not calibrated":
        return "not calibrated"
    if roof.get("status") == STALE:
        return "stale roof: rerun gpuplay calibrate"
    if roof.get("status") != "ok":
        return "—"
    ridge = f", ridge {roof['ridge_flop_per_byte']:.3g}" if roof.get("ridge_flop_per_byte") else ""
    return f"{roof_text(roof)} (AI {roof['intensity_flop_per_byte']:.3g} FLOP/B{ridge})"


def split_note(split: dict[str, list[float]], step_s: float | None = None) -> str:
    """Where a step's time went (median per step of each phase), and the loader's verdict.

    With `step_s` (the step's median) each phase is a share of the step, and what the phases do not
    cover (the loop, Python, the timers) is "other", so the parts add up to the step; the phases'
    medians can sum past the step's median, and then they fill it with no "other"."""
    import statistics  # here: its fractions and decimal are ~3 ms of the front end's start

    med = {k: statistics.median(v) for k, v in split.items() if v}
    total = sum(med.values())
    if not total:
        return "split: nothing recorded"
    step = max(step_s or 0.0, total)
    if step_s and math.isfinite(step_s) and step > total:
        med["other"] = step - total
    words = {"data_wait_s": "data wait", "h2d_s": "h2d", "model_s": "model"}
    parts = [f"{words.get(k, k)} {fmt_time(v)} ({100 * v / step:.0f} %)" for k, v in med.items()]
    wait = med.get("data_wait_s", 0.0) / step
    verdict = (
        f"; the model is idle {100 * wait:.0f} % of the step: the loader is the bottleneck"
        if wait > 0.5
        else ""
    )
    return "split: " + ", ".join(parts) + verdict


def setup_notes(r: RunResult) -> list[str]:
    """What was paid once, outside the steps (a compile, a runtime's build), and the step's split."""
    notes = []
    if r.compile_s is not None:
        notes.append(f"compile {fmt_time(r.compile_s)} (excluded)")
    if r.build_s is not None:
        notes.append(f"{r.conditions.get('runtime', 'runtime')} build {fmt_time(r.build_s)} (excluded)")
    if r.split:
        notes.append(split_note(r.split, r.median))
    return notes


def row_cells(row: Row, noise: bool = True) -> list[str]:
    """The cells of COLUMNS; `noise=False` leaves the noise warnings out of the notes (the
    terminal prints them apart, in colour)."""
    r = row.result
    s = r.summary
    roof = r.roof_fields()
    notes = list(row.warnings)
    if r.status != "ok":
        notes.insert(0, f"{r.status}: {r.message}")
    notes.extend(setup_notes(r))
    shown = ("runtime:", "torch.compile failed", "AMP:", "the result holds", "kernels per step", "accuracy:", "INT8:",
             "allocation-bound", "allocation mode could flip", "cold allocation", "allocation mode:",
             "float16 ", "bfloat16 ")  # fmt: skip
    # ("float16 is emulated and slow on this CPU: …": core/halfprec's note on a CPU half-precision run.)
    # ("allocation-bound pairs: …" starts with "allocation-bound" too.)
    notes.extend(n for n in r.notes if n.startswith(shown))
    if roof.get("status") in ("ok", STALE) and roof.get("note"):
        notes.append(f"roof: {roof['note']}")
    if row.speedup_reason:
        notes.append(f"~ speedup: {row.speedup_reason}")
    pairs_note = paired_medians_note(row)
    if pairs_note:
        notes.append(pairs_note)
    energy = energy_of(r.telemetry)
    if energy is not None and energy.status == "ok":
        notes.append(energy.text())
    activity = gpm.summary(gpu_activity(r.telemetry))
    if activity:
        window = (r.telemetry or {}).get("gpu_window")
        notes.append(f"GPM: {activity} during {visible(str(window)[:80]) if window else 'the timed steps'}")
    peak = peak_memory_text(r)
    if peak:
        notes.append(peak)
    if noise:
        notes.extend(r.noise_warnings)
    return [
        r.spec.scenario or r.spec.workload,
        r.size,
        r.spec.label(),
        r.compute_dtype or r.spec.dtype,
        headline_time(r),
        f"±{100 * s.rel_iqr / 2:.1f}%" if s and math.isfinite(s.rel_iqr) else "—",
        str(s.n) if s else "0",
        fmt_rate(r.gflops, "FLOP/s").replace(" GFLOP/s", "").replace(" TFLOP/s", "k"),
        fmt_rate(r.gbps, "B/s").replace(" GB/s", "").replace(" TB/s", "k"),
        fmt_row_speedup(row, interval=noise),
        fmt_error(r),
        roof_markdown(roof) if noise else roof_cell(roof),
        threads_text(r.conditions),
        "; ".join(notes),
    ]


def headline_time(r: RunResult) -> str:
    """The run's median as a table shows it (`median_words`); "—" where it has none."""
    s = r.summary
    return median_words(s.median, r.fresh_spread, r.other_mode) if s else "—"


def median_words(median_s: float, spread: dict[str, Any] | None, other: dict[str, Any] | None) -> str:
    """A median, the fresh processes' range where they disagree, and the other allocation mode's
    beside it by name where the two differ: '11.4 ms · 6.4 ms with pages reused',
    '21.1 ms (20.4 ms–40.3 ms in 3 fresh processes) · 39.3 ms with pages returned'."""
    text = fmt_time(median_s)
    if spread is not None:  # no one figure: the middle of the fresh processes, their range beside it
        text += (
            f" ({fmt_time(spread['min_s'])}–{fmt_time(spread['max_s'])} in {spread['loops']} fresh processes)"
        )
    if other is None:
        return text
    return f"{text} · {fmt_time(other['median_s'])} with {other['name']}"


def to_markdown(rows: Sequence[Row], title: str = "") -> str:
    env = environment()
    out = []
    if title:
        out.append(f"### {title}\n")
    out.append(
        f"Machine: {env['cpu']} ({env['cores']} cores), Python {env['python']}, NumPy {env.get('numpy', '?')}, "
        f"PyTorch {env.get('torch', 'not installed')}. Medians of timed steps after warm-up; IQR as ± half its "
        "width; CPU steps timed with perf_counter_ns (synchronous), GPU steps with CUDA events from an idle GPU "
        "(host dispatch included, warm and cold alike); compile time excluded; errors relative to a float64 NumPy reference.\n"
    )
    out.append("| " + " | ".join(COLUMNS) + " |")
    out.append("|" + "---|" * len(COLUMNS))
    for row in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row_cells(row)) + " |")
    return "\n".join(out) + "\n"


def to_csv(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        [
            "scenario",
            "workload",
            "size",
            *_with_derived(levers.csv_columns(), "device_name", "compute_dtype"),
            "status",
            "median_s",
            "p25_s",
            "p75_s",
            "p10_s",
            "p90_s",
            "min_s",
            "mean_s",
            "n",
            "headline_mode",
            "other_mode",
            "other_mode_median_s",
            "fresh_min_s",
            "fresh_max_s",
            "compile_s",
            "build_s",
            "gflops",
            "gbps",
            "speedup_vs_numpy_cpu",
            "speedup_low",
            "speedup_high",
            "speedup_pairs",
            "speedup_unstable",
            "rel_error",
            "tolerance",
            "check_ok",
            "torch_threads",
            "blas_threads",
            "intensity_flop_per_byte",
            "roof_status",
            "roof_bound",
            "roof_fraction",
            "roof_gflops",
            "roof_peak_gflops",
            "roof_bandwidth_gbs",
            "energy_j_per_step",
            "gflop_per_j",
            "energy_status",
            "energy_scope",
            *GPM_COLUMNS,
            "gpm_note",
            "peak_memory_bytes",
            "unstable",
            "other_cpu_cores",
            "noise_warnings",
            "message",
        ]
    )
    for row in rows:
        r, s, c = row.result, row.result.summary, row.result.conditions
        th = c.get("threads") or {}
        roof = r.roof_fields()
        host_noise = (r.telemetry.get("noise") or {}).get("host") or {}
        w.writerow(
            [
                r.spec.scenario,
                r.spec.workload,
                r.size,
                *_with_derived(
                    levers.csv_cells(r.spec, c, _resolved_params(r.spec)),
                    c.get("device_name", ""),
                    r.compute_dtype,
                ),
                r.status,
                *(
                    f"{v:.9g}" if v is not None else ""
                    for v in ([s.median, s.p25, s.p75, s.p10, s.p90, s.min, s.mean] if s else [None] * 7)
                ),
                s.n if s else 0,
                *_alloc_cells(r),
                r.compile_s if r.compile_s is not None else "",
                r.build_s if r.build_s is not None else "",
                r.gflops if r.gflops is not None else "",
                r.gbps if r.gbps is not None else "",
                row.speedup if row.speedup is not None else "",
                *(row.speedup_interval or ("", "")),
                row.speedup_pairs if row.speedup_pairs is not None else "",
                bool(row.speedup_marker),
                r.error if r.error is not None else "",
                r.tolerance if r.tolerance is not None else "",
                r.check_ok if r.check_ok is not None else "",
                th.get("torch_intraop", ""),
                th.get("numpy_blas", ""),
                *(
                    "" if roof.get(k) is None else roof[k]
                    for k in (
                        "intensity_flop_per_byte",
                        "status",
                        "bound",
                        "fraction",
                        "roof_gflops",
                        "peak_gflops",
                        "bandwidth_gbs",
                    )
                ),
                *_energy_cells(r.telemetry),
                *_gpm_cells(r.telemetry),
                r.peak_memory["bytes"] if r.peak_memory else "",
                r.unstable,
                host_noise.get("other_cores", ""),
                "; ".join(r.noise_warnings),
                r.message,
            ]
        )
    return buf.getvalue()


def _alloc_cells(r: RunResult) -> list[Any]:
    """Where two allocation modes were timed: the headline's name, the other's name and median;
    where fresh processes disagreed, their range."""
    spread = r.fresh_spread
    ends = [f"{spread['min_s']:.9g}", f"{spread['max_s']:.9g}"] if spread else ["", ""]
    other = r.other_mode
    if other is None:
        return ["", "", "", *ends]
    return [other.get("headline", ""), other["name"], f"{other['median_s']:.9g}", *ends]


def _resolved_params(spec: RunSpec) -> dict[str, Any] | None:
    """The parameters a row ran with, defaults included (None for a workload no longer known)."""
    from gpuplay.core.workloads import get_workload

    try:
        return get_workload(spec.workload).resolve(spec.params)
    except Exception:  # a user's code file changed or gone since: its parameters as given
        return None


def _with_derived(lever_cells: list[Any], device_name: Any, compute_dtype: Any) -> list[Any]:
    """The levers' columns (core/catalogue/levers.py), with what the device and dtype resolved to beside them."""
    columns = levers.csv_columns()
    cells = list(lever_cells)
    cells.insert(columns.index("dtype") + 1, compute_dtype)
    cells.insert(columns.index("device") + 1, device_name)  # before dtype: its index still holds
    return cells


# GPM's averages over the timed window (core/hw/nvidia.py), one CSV column each.
GPM_KEYS = (
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "hmma_active",
    "imma_active",
    "dmma_active",
    "dram_active",
)
GPM_COLUMNS = tuple(f"{k}_pct" for k in GPM_KEYS)


def gpu_activity(telemetry: dict[str, Any]) -> dict[str, Any] | None:
    """The run's GPM figures or {"reason": …}; None for a run with no GPU telemetry."""
    activity = (telemetry.get("gpu") or {}).get("activity")
    return activity if isinstance(activity, dict) else None


def _gpm_cells(telemetry: dict[str, Any]) -> list[Any]:
    a = gpu_activity(telemetry) or {}
    cells = [gpm.bounded(k, a.get(k)) for k in GPM_KEYS]
    return [*("" if v is None else round(v, 1) for v in cells), str(a.get("reason") or "")]


def peak_memory_text(r: RunResult) -> str:
    """The run's own peak device memory in words, with how it was counted ('' when not counted)."""
    peak = r.peak_memory
    if not peak:
        return ""
    if peak.get("bytes") is None:  # the device keeps no peak count: say so, and what it does offer
        return f"peak memory {visible(peak.get('source') or 'n/a', one_line=True)}"
    how = f" ({visible(peak['source'], one_line=True)})" if peak.get("source") else ""
    return f"peak memory {fmt_bytes(peak['bytes'])}{how}"


def _energy_cells(telemetry: dict[str, Any]) -> list[Any]:
    e = energy_of(telemetry)
    if e is None:
        return ["", "", "", ""]
    return [
        e.joules_per_step if e.joules_per_step is not None else "",
        e.gflop_per_j if e.gflop_per_j is not None else "",
        e.status,
        e.scope,
    ]


def _energy_fields(telemetry: dict[str, Any]) -> dict[str, Any]:
    e = energy_of(telemetry)
    if e is None:
        return {}
    return {"energy_per_step_j": e.joules_per_step, "gflop_per_j": e.gflop_per_j, "energy_status": e.status,
            "energy_scope": e.scope}  # fmt: skip


def to_json(rows: Sequence[Row], **meta: Any) -> str:
    doc = {
        "environment": environment(),
        **meta,
        "results": [
            {
                **row.result.to_dict(),
                "speedup_vs_numpy_cpu": row.speedup,
                "speedup_interval": row.speedup_interval,
                "speedup_pairs": row.speedup_pairs,
                "speedup_method": row.paired.method if row.paired else ("unpaired" if row.speedup else None),
                "speedup_unstable": row.speedup_reason or None,
                "baseline": row.baseline.spec.label() if row.baseline else None,
                "warnings": row.warnings,
                **_energy_fields(row.result.telemetry),
                "gpu_activity": gpu_activity(row.result.telemetry),
            }
            for row in rows
        ],
    }
    return json.dumps(doc, indent=2, default=str)


NOTES = COLUMNS.index("notes")


def footnotes(rows: Sequence[Row]) -> list[str]:
    cells = [row_cells(row, noise=False) for row in rows]
    return [f"[{i}] {c[NOTES]}" for i, c in enumerate(cells, 1) if c[NOTES]]


def error_reference(workloads: Sequence[str]) -> str:
    """What the error column of a table of these workloads is measured against, in words for a
    footer: "float64 NumPy" for most, a workload's own reference where it has one (inference is
    checked against its float32 forward pass), each named where they differ."""
    from gpuplay.core.workloads import reference_name

    def words(ref: str) -> str:
        return "float64 NumPy" if ref == "float64" else ref

    refs: dict[str, list[str]] = {}
    for name in dict.fromkeys(workloads):  # first-seen order, once each
        refs.setdefault(words(reference_name(name)), []).append(name)
    if not refs:
        return "float64 NumPy"
    if len(refs) == 1:
        return next(iter(refs))
    common = "float64 NumPy" if "float64 NumPy" in refs else next(iter(refs))
    others = "; ".join(
        f"{', '.join(visible(n) for n in names)}: {ref}" for ref, names in refs.items() if ref != common
    )
    return f"{common} ({others})"
