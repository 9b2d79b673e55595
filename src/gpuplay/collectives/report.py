"""A sweep's figures as a text table, CSV or JSON; and the session log rank 0 appends to."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import os
from typing import Any

from gpuplay.collectives.sizes import format_size
from gpuplay.core.reports.report import fmt_time

FORMATS = ("table", "json", "csv")


def _gbs(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}"


def header(doc: dict[str, Any]) -> str:
    env = doc.get("environment", {})
    hosts = doc.get("hosts") or []
    names = sorted({r.get("device_name", "?") for r in doc.get("ranks") or []})
    where = f"{doc.get('nodes', 1)} node(s): {', '.join(hosts)}" if hosts else "1 node"
    lines = [
        f"gpuplay collectives · {doc.get('backend')} · {doc.get('world_size')} rank(s) on {where}",
        f"devices: {', '.join(names) or '?'} · PyTorch {env.get('torch', '?')}"
        + (f" · NCCL {env['nccl']}" if env.get("nccl") else "")
        + (f" · {doc['threads_per_rank']} torch thread(s) per rank" if doc.get("threads_per_rank") else ""),
        f"{doc.get('dtype')} · {doc.get('iters')} iterations after {doc.get('warmup')} warm-up (the first "
        f"checked), timed as nccl-tests: loops of {doc.get('ops_per_sample', 1)} back-to-back op(s), median "
        f"of {doc.get('samples', doc.get('iters'))} loops · time per op = slowest rank · ± = half the IQR",
    ]
    if doc.get("world_size") == 1:
        lines.append("one rank: nothing crosses a bus, so busbw is 0 by definition (broadcast's factor is 1)")
    return "\n".join(lines)


def to_table(doc: dict[str, Any]) -> str:
    cols = ["op", "size", "count", "median", "±", "min", "algbw GB/s", "busbw GB/s", "check"]
    rows = []
    for r in doc.get("results", []):
        if r.get("status") != "ok":
            rows.append(
                [
                    r["op"],
                    format_size(r["size_bytes"]),
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    f"{r['status']}: {r['message']}",
                ]
            )
            continue
        s = r["summary"]
        spread = f"±{100 * (s['p75'] - s['p25']) / 2 / s['median']:.1f}%" if s["median"] > 0 else "—"
        check = "ok" if r["check_ok"] else f"WRONG (max error {r['max_error']:g})"
        rows.append(
            [
                r["op"],
                format_size(r["size_bytes"]),
                str(r["count"]),
                fmt_time(s["median"]),
                spread,
                fmt_time(s["min"]),
                _gbs(r["algbw_gbs"]),
                _gbs(r["busbw_gbs"]),
                check,
            ]
        )
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(cols)]
    right = {2, 3, 4, 5, 6, 7}

    def line(cells: list[str]) -> str:
        return "  ".join(
            (c.rjust(w) if i in right else c.ljust(w)) if i < len(cells) - 1 else c
            for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    out = [header(doc), "", line(cols)]
    out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n"


def to_csv(doc: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["op", "backend", "world_size", "nodes", "size_bytes", "count", "status", "median_s",
                "p25_s", "p75_s", "min_s", "n", "algbw_gbs", "busbw_gbs", "bus_factor", "check_ok", "message"])  # fmt: skip
    for r in doc.get("results", []):
        s = r.get("summary") or {}
        w.writerow(
            [
                r["op"], doc.get("backend"), doc.get("world_size"), doc.get("nodes"), r["size_bytes"],
                r.get("count", ""), r["status"],
                *(f"{s[k]:.9g}" if k in s else "" for k in ("median", "p25", "p75", "min")),
                s.get("n", 0), r.get("algbw_gbs", ""), r.get("busbw_gbs", ""), r.get("bus_factor", ""),
                r.get("check_ok", ""), r.get("message", ""),
            ]
        )  # fmt: skip
    return buf.getvalue()


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=str)


def render(doc: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return to_json(doc)
    if fmt == "csv":
        return to_csv(doc)
    return to_table(doc)


def series(doc: dict[str, Any], field: str = "busbw_gbs") -> dict[str, list[tuple[int, float]]]:
    """Per op, (size in bytes, value) in size order: what a bandwidth-against-size plot draws."""
    out: dict[str, list[tuple[int, float]]] = {}
    for r in doc.get("results", []):
        if r.get("status") == "ok" and r.get(field) is not None:
            out.setdefault(r["op"], []).append((int(r["size_bytes"]), float(r[field])))
    return {op: sorted(points) for op, points in out.items()}


def append_session_log(doc: dict[str, Any]) -> str:
    """One JSON line per (op, size) in the session folder, fsynced; returns the path or the problem.

    Named collectives-*.jsonl so `gpuplay history`, which reads session-*.jsonl of RunResults, skips it.
    """
    from gpuplay.core.reports.sessionlog import sessions_dir

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = sessions_dir() / f"collectives-{stamp}-{os.getpid()}.jsonl"
    meta = {k: v for k, v in doc.items() if k != "results"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            for r in doc.get("results", []):
                f.write(json.dumps({**meta, **r}, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        return f"session log not written: {exc}"
    return str(path)
