"""A sweep as text: JSON, CSV and Markdown, from its dictionary (so a file read back renders too),
and several sweep files merged into one table (`gpuplay compare --from a.json b.json`)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuplay.core.reports.report import fmt_time
from gpuplay.core.storage.safeload import read_json_file

KIND = "gpuplay-sweep"
POINT_FIELDS = ("value", "status", "median", "low", "high", "n", "gflops", "gbps", "roof_fraction", "roof_s",
                "error", "message")  # fmt: skip


def document(sweep: Mapping[str, Any], environment: Mapping[str, Any]) -> dict[str, Any]:
    return {"kind": KIND, "environment": _finite(dict(environment)), "sweep": _finite(dict(sweep))}


def _finite(x: Any) -> Any:
    """The document with every non-finite float as null: JSON has no NaN."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def fmt_value(x: Any) -> str:
    v = _num(x)
    if v is None:
        return "—"
    return f"{v:.0f}" if abs(v) >= 10 or v == round(v) else f"{v:.3g}"


def fmt_rate(gigas: Any, unit: str) -> str:
    v = _num(gigas)
    if v is None:
        return "—"
    return f"{v / 1000:.3g} T{unit[1:]}" if v >= 1000 else f"{v:.3g} {unit}"


def cell(point: Mapping[str, Any] | None) -> str:
    """One point as a table cell: '1.23 ms ±4%', or its status."""
    if not point:
        return ""
    med = _num(point.get("median"))
    if med is None:
        return str(point.get("status") or "—")
    lo, hi = _num(point.get("low")), _num(point.get("high"))
    spread = f" ±{50 * (hi - lo) / med:.0f}%" if lo is not None and hi is not None and med > 0 else ""
    # an unstable spread (or another job on the machine) is marked, as the run table's notes do
    return fmt_time(med) + spread + (" ⚠" if point.get("unstable") else "")


def fit_text(fit: Mapping[str, Any] | None) -> str:
    if not fit:
        return "no fit (fewer than two sizes measured)"
    if fit.get(
        "none"
    ):  # sizes measured, no work counted (core/studies/sweep.py Series._no_fit); a file's words
        return f"no fit ({str(fit['none'])[:200]})"
    floor = fmt_time(_num(fit.get("floor_s")))
    rate = fmt_rate(fit.get("rate"), str(fit.get("unit", "")))
    resid = _num(fit.get("rms_rel_residual"))
    fitq = f", fit within {100 * resid:.0f}% rms" if resid is not None else ""
    if fit.get("rate") is None:
        return f"floor {floor}; time did not grow with size over this range{fitq}"
    return f"floor {floor} + work at {rate}{fitq}"


def crossover_text(c: Mapping[str, Any]) -> str:
    pred = c.get("predicted")
    model = (
        f"; the fits predict {fmt_value(pred)}"
        if _num(pred) is not None
        else "; the fits predict no crossing"
    )
    if c.get("at") is None:
        return f"{c.get('reason', '')}{model if _num(pred) is not None else ''}"
    return f"measured: {c.get('reason', '')}{model}"


def rows(sweep: Mapping[str, Any]) -> list[tuple[Any, list[Mapping[str, Any] | None]]]:
    """(size, that size's point of each series, or None) per size."""
    series = sweep.get("series") or []
    out = []
    for v in sweep.get("values") or []:
        at = [next((p for p in s.get("points") or [] if p.get("value") == v), None) for s in series]
        out.append((v, at))
    return out


def to_csv(sweep: Mapping[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["scenario", "param", "series", "backend", "device", "dtype", "variant", "transfers",
                *POINT_FIELDS, "fit_floor_s", "fit_rate", "fit_unit"])  # fmt: skip
    for s in sweep.get("series") or []:
        fit = s.get("fit") or {}
        for p in s.get("points") or []:
            w.writerow([sweep.get("scenario"), sweep.get("param"), s.get("label"), s.get("backend"),
                        s.get("device"), s.get("dtype"), s.get("variant"), s.get("transfers"),
                        *["" if p.get(k) is None else p.get(k) for k in POINT_FIELDS],
                        fit.get("floor_s", ""), fit.get("rate", ""), fit.get("unit", "")])  # fmt: skip
    return buf.getvalue()


def _md(text: Any) -> str:
    """A table cell: pipes and line breaks would break the table."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _machine(env: Mapping[str, Any]) -> str:
    return f"{env.get('cpu', '?')} ({env.get('cores', '?')} cores)"


def machine_text(doc: Mapping[str, Any]) -> str:
    """The machine a sweep document ran on; a merged one's machines, each with its file's name
    when they differ (one line for files from the same machine)."""
    envs = doc.get("environments")
    if isinstance(envs, Mapping) and envs:
        named = {name: _machine(env if isinstance(env, Mapping) else {}) for name, env in envs.items()}
        if len(set(named.values())) == 1:
            return next(iter(named.values()))
        return "; ".join(f"{name}: {machine}" for name, machine in named.items())
    env = doc.get("environment")
    return _machine(env if isinstance(env, Mapping) else {})


def to_markdown(sweep: Mapping[str, Any], environment: Mapping[str, Any] | str | None = None) -> str:
    """The sweep as Markdown; `environment` is one run's, or a merged file's machine_text."""
    series = sweep.get("series") or []
    param = sweep.get("param", "?")
    out = [f"### {_md(sweep.get('scenario', '?'))}: time per step against {_md(param)}\n"]
    if isinstance(environment, str):
        out.append(f"Machines: {_md(environment)}. Medians of timed steps after warm-up, ± half the IQR; "
                   "each size a full measurement.\n")  # fmt: skip
    elif environment:
        out.append(
            f"Machine: {_md(_machine(environment))}, "
            f"NumPy {environment.get('numpy', '?')}, PyTorch {environment.get('torch', 'not installed')}. "
            "Medians of timed steps after warm-up, ± half the IQR; each size a full measurement.\n"
        )
    out.append("| " + " | ".join([_md(param), *(_md(s.get("label")) for s in series)]) + " |")
    out.append("|" + "---|" * (len(series) + 1))
    for v, points in rows(sweep):
        out.append("| " + " | ".join([fmt_value(v), *(_md(cell(p)) for p in points)]) + " |")
    out.append("")
    for s in series:
        out.append(f"- **{_md(s.get('label'))}**: {_md(fit_text(s.get('fit')))}")
        if s.get("stopped"):
            out.append(f"  - {_md(s['stopped'])}")
    for c in sweep.get("crossovers") or []:
        out.append(f"- crossover: {_md(crossover_text(c))}")
    for r in sweep.get("refused") or []:
        out.append(f"- refused {_md(r.get('label'))}: {_md(r.get('reason'))}")
    return "\n".join(out) + "\n"


# -- several files ---------------------------------------------------------------------------
class SweepFileError(ValueError):
    """A file that is not a sweep, said with its path."""


def is_sweep_file(path: str | Path) -> bool:
    """Whether the file is a sweep; raises SweepFileError when it cannot be read as JSON at all."""
    doc = read_json_file(path, SweepFileError)
    return isinstance(doc, dict) and isinstance(doc.get("sweep"), dict)


def load_sweep(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    doc = read_json_file(p, SweepFileError)
    sweep = doc.get("sweep") if isinstance(doc, dict) else None
    if not isinstance(sweep, dict) or not isinstance(sweep.get("series"), list):
        raise SweepFileError(f"{p}: not a sweep file; write one with gpuplay sweep --format json")
    return doc


def merge_sweeps(docs: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One sweep whose series are every file's, each label prefixed with its file's name.

    Files that swept different scenarios or parameters cannot share an axis: refused.
    """
    if not docs:
        raise SweepFileError("no sweep files given")
    first = docs[0]["sweep"]
    for doc, name in zip(docs[1:], names[1:], strict=True):
        s = doc["sweep"]
        if (s.get("scenario"), s.get("param")) != (first.get("scenario"), first.get("param")):
            raise SweepFileError(
                f"{name} swept {s.get('scenario')} over {s.get('param')}, the first file "
                f"{first.get('scenario')} over {first.get('param')}: one axis per table"
            )
    values = sorted({v for d in docs for v in d["sweep"].get("values") or [] if _num(v) is not None})
    series = []
    for doc, name in zip(docs, names, strict=True):
        for s in doc["sweep"].get("series") or []:
            series.append({**s, "label": f"{name}: {s.get('label')}", "source": name})
    crossovers = [
        {**c, "faster": f"{name}: {c.get('faster')}", "slower": f"{name}: {c.get('slower')}"}
        for doc, name in zip(docs, names, strict=True)
        for c in doc["sweep"].get("crossovers") or []
    ]
    return {"scenario": first.get("scenario"), "param": first.get("param"), "values": values,
            "series": series, "crossovers": crossovers, "sources": list(names)}  # fmt: skip
