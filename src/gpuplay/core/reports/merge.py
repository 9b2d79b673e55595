"""Result files from several machines in one table: one column per file (device, versions, date).

Reads what `gpuplay run --format json` and `gpuplay compare --format json` write
(core.report.to_json: {"environment": ..., "results": [RunResult.to_dict() + extras]}), and the
JSON of `gpuplay collectives` (kind "gpuplay-collectives"), whose rows are (op, size, backend × ranks).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplay.core.reports.report import fmt_time
from gpuplay.core.storage.safeload import FileReadError, json_loads, read_text_file
from gpuplay.core.storage.safetext import markdown_cell


class MergeError(ValueError):
    """A file that is not a gpuplay result file, said with its path."""


@dataclass
class Source:
    path: str
    environment: dict[str, Any]
    results: list[dict[str, Any]]
    name: str = ""  # column heading; the file name unless two files share it

    @property
    def devices(self) -> str:
        names: list[str] = []
        for r in self.results:
            c = r.get("conditions") or {}
            n = c.get("device_name") or (r.get("spec") or {}).get("device", "?")
            if n not in names:
                names.append(n)
        return " + ".join(names) or self.environment.get("cpu", "?")

    @property
    def versions(self) -> str:
        env = self.environment
        parts = [f"gpuplay {env.get('gpuplay', '?')}"]
        for key, title in (
            ("torch", "PyTorch"),
            ("numpy", "NumPy"),
            ("cupy-cuda12x", "CuPy"),
            ("cupy-cuda13x", "CuPy"),
        ):
            if env.get(key):
                parts.append(f"{title} {env[key]}")
        return ", ".join(parts)

    @property
    def date(self) -> str:
        stamps = sorted(str(r.get("finished") or r.get("started") or "") for r in self.results)
        stamps = [s for s in stamps if s]
        return stamps[-1][:10] if stamps else "?"


def load_source(path: str | Path) -> Source:
    p = Path(path)
    try:
        doc = json_loads(read_text_file(p))
    except FileReadError as exc:  # missing, a FIFO or folder, too large, not UTF-8: said with the path
        raise MergeError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise MergeError(
            f"{p}: not JSON ({exc}); give files written by gpuplay run/compare --format json"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or "environment" not in doc:
        raise MergeError(
            f"{p}: not a gpuplay result file (no 'environment' and 'results'); "
            "write one with gpuplay run/compare --format json"
        )
    if doc.get("kind") == "gpuplay-collectives":
        results = _collective_rows(doc)
    else:
        results = [r for r in doc["results"] if isinstance(r, dict) and isinstance(r.get("spec"), dict)]
    if not results:
        raise MergeError(f"{p}: holds no results")
    return Source(str(p), dict(doc["environment"]), results, p.name)


def _binary_size(n: int) -> str:
    """Bytes as collectives print them: 1024 → '1K', 16 MiB → '16M' (exact multiples only)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n} B"


def _collective_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A collectives sweep's rows in the shape of run results: scenario = op, label = backend × ranks."""
    names = sorted({str(r.get("device_name", "?")) for r in doc.get("ranks") or [] if isinstance(r, dict)})
    label = f"{doc.get('backend', '?')} × {doc.get('world_size', '?')} ranks on {doc.get('nodes', 1)} node(s)"
    return [
        {
            "scenario": r.get("op", "?"),
            "size": _binary_size(int(r.get("size_bytes", 0))),
            "label": label,
            "status": r.get("status", "ok"),
            "summary": r.get("summary"),
            "busbw_gbs": r.get("busbw_gbs"),
            "conditions": {"device_name": " + ".join(names)},
            "finished": doc.get("started", ""),
        }
        for r in doc.get("results", [])
        if isinstance(r, dict)
    ]


@dataclass
class MergedRow:
    scenario: str
    size: str
    label: str
    cells: list[dict[str, Any] | None] = field(default_factory=list)  # one per source


def merge(sources: Sequence[Source]) -> list[MergedRow]:
    """Rows keyed by (scenario, size, configuration label), in first-seen order; None where a file lacks it."""
    names = [s.name for s in sources]
    for i, s in enumerate(sources):
        if names.count(s.name) > 1:
            s.name = f"{s.name} ({i + 1})"
    rows: dict[tuple[str, str, str], MergedRow] = {}
    for i, src in enumerate(sources):
        for r in src.results:
            key = (
                str(r.get("scenario") or r.get("workload") or "?"),
                str(r.get("size", "")),
                str(r.get("label", "")),
            )
            row = rows.setdefault(key, MergedRow(*key, cells=[None] * len(sources)))
            if row.cells[i] is None:
                row.cells[i] = r
    return list(rows.values())


def cell_text(r: dict[str, Any] | None) -> str:
    if r is None:
        return "—"
    s = r.get("summary")
    if not s or r.get("status") not in ("ok", "cancelled"):
        return str(r.get("status", "—"))
    med = s.get("median")
    iqr = s.get("iqr")
    spread = f" ±{100 * iqr / 2 / med:.1f}%" if med and iqr is not None and math.isfinite(iqr) else ""
    bus = r.get("busbw_gbs")
    return f"{fmt_time(med)}{spread}" + (f" · busbw {bus:.3g} GB/s" if isinstance(bus, int | float) else "")


def to_markdown(sources: Sequence[Source], rows: Sequence[MergedRow]) -> str:
    # Every cell but the headings comes from the files (names, versions, statuses): escaped, so a
    # `|` cannot split a row and an ESC cannot reach the terminal the Markdown is printed on.
    md = markdown_cell
    head = ["scenario", "size", "configuration", *(md(s.name) for s in sources)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, attr in (("device", "devices"), ("versions", "versions"), ("date", "date")):
        out.append("| " + " | ".join(["", "", f"*{label}*", *(md(getattr(s, attr)) for s in sources)]) + " |")
    for row in rows:
        cells = [row.scenario, row.size, row.label, *(cell_text(c) for c in row.cells)]
        out.append("| " + " | ".join(md(c) for c in cells) + " |")
    machines = "; ".join(
        md(f"{s.name}: {s.environment.get('cpu', '?')} ({s.environment.get('cores', '?')} cores)")
        for s in sources
    )
    return "\n".join(out) + f"\n\nMedians ± half the IQR, as each machine measured them. Hosts: {machines}.\n"


def to_dict(sources: Sequence[Source], rows: Sequence[MergedRow]) -> dict[str, Any]:
    return {
        "sources": [
            {"file": s.path, "name": s.name, "devices": s.devices, "versions": s.versions, "date": s.date,
             "environment": s.environment}
            for s in sources
        ],
        "rows": [
            {
                "scenario": r.scenario,
                "size": r.size,
                "configuration": r.label,
                "medians_s": [(c.get("summary") or {}).get("median") if c else None for c in r.cells],
            }
            for r in rows
        ],
    }  # fmt: skip


def to_csv(sources: Sequence[Source], rows: Sequence[MergedRow]) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["scenario", "size", "configuration", *(f"{s.name} median_s" for s in sources)])
    for r in rows:
        meds = [(c.get("summary") or {}).get("median") if c else None for c in r.cells]
        w.writerow([r.scenario, r.size, r.label, *("" if m is None else f"{m:.9g}" for m in meds)])
    return buf.getvalue()
