"""What gpuplay's Python API hands back: Result, Results, Sweep, Comparison and Table.

Plain objects over the core's RunResult and sweep documents, with their figures as attributes,
`to_dict()`, `to_pandas()` (pandas: the `pandas` extra) and the displays a notebook calls
(`_repr_html_`, `_repr_markdown_`; a sweep's chart with matplotlib). Every text from a file, a
scenario or an exception is escaped for HTML and Markdown here. docs/python-api.md.
"""

from __future__ import annotations

import html
import io
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from gpuplay.core.storage.safetext import visible

if TYPE_CHECKING:
    from gpuplay.core.reports.crossversion import Change
    from gpuplay.core.result import RunResult
    from gpuplay.core.studies.compare import Row

__all__ = ["Comparison", "Ladder", "Result", "Results", "Sweep", "Table"]


def _h(text: object) -> str:
    """Outside text (a file's, a scenario's, an exception's) for HTML: controls shown, markup escaped."""
    return html.escape(visible(text, one_line=True))


def _md(text: object) -> str:
    """Outside text for a Markdown table cell: controls shown, HTML and Markdown specials escaped."""
    s = html.escape(visible(text, one_line=True))
    for ch in "\\`*_[]|<>#":
        s = s.replace(ch, "\\" + ch)
    return s


def _fmt_time(s: float | None) -> str:
    from gpuplay.core.reports.report import fmt_time

    return fmt_time(s)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


class Result:
    """One measurement: its figures, its check against float64, and what it ran on.

    `median` is seconds per step; `iqr` the 25th–75th percentile of the step times (the ±
    the CLI prints is half its width; torch.utils.benchmark's name; `interval` is its deprecated
    alias); `speedup` is over NumPy on the CPU, measured in interleaved
    pairs, with its 95% `speedup_interval`; `other_mode`, where a CPU step's time depends on the
    allocator, the mode a fresh plain loop does not get (`median` is the one it gets); `fresh_spread`,
    where fresh processes of a plain loop disagreed by more than 10 %, their range (`median` is the
    middle one's); `conditions` includes `versions` (gpuplay, Python,
    NumPy, torch and its CUDA/HIP runtime, CuPy, the driver, the device UUID).
    """

    def __init__(self, row: Row) -> None:
        self._row = row
        r = row.result
        self.run_result: RunResult = r
        self.scenario: str = r.spec.scenario or r.spec.workload
        self.configuration: str = r.spec.label()
        self.backend, self.device, self.dtype = r.spec.backend, r.spec.device, r.spec.dtype
        self.size: str = r.size
        self.status: str = r.status
        self.message: str = r.message
        self.samples: tuple[float, ...] = tuple(r.samples)
        s = r.summary if r.usable else None
        self.median: float | None = s.median if s else None
        self.iqr: tuple[float, float] | None = (s.p25, s.p75) if s else None
        self.check_ok: bool | None = r.check_ok
        self.error: float | None = r.error
        self.tolerance: float | None = r.tolerance
        self.speedup: float | None = row.speedup if r.usable else None
        iv = row.speedup_interval
        self.speedup_interval: tuple[float, float] | None = (iv[0], iv[1]) if iv and r.usable else None
        self.speedup_note: str = row.speedup_reason
        self.baseline: str | None = (r.speedup or {}).get("baseline") or (
            row.baseline.spec.label() if row.baseline is not None and row.baseline is not r else None
        )
        self.baseline_median: float | None = _finite((r.speedup or {}).get("baseline_median_s")) or (
            row.baseline.median if row.baseline is not None and row.baseline is not r else None
        )
        self.conditions: dict[str, Any] = dict(r.conditions)
        self.notes: list[str] = [*r.notes, *row.warnings]
        self.gflops, self.gbps = r.gflops, r.gbps
        # Where the host allocation modes differ: `median` is the one a plain loop in a fresh
        # process gets; this is the other, {"mode", "name", "median_s", ...} (docs/engine.md).
        self.other_mode: dict[str, Any] | None = dict(r.other_mode) if r.other_mode and r.usable else None
        # Where fresh processes' plain loops disagreed by more than 10 %: `median` is the middle
        # one's; this is their range, {"loops", "min_s", "max_s", "faults_min", "faults_max"}.
        self.fresh_spread: dict[str, Any] | None = (
            dict(r.fresh_spread) if r.fresh_spread and r.usable else None
        )

    @property
    def interval(self) -> tuple[float, float] | None:
        """Deprecated: the IQR, now `iqr` (an interval beside `speedup_interval`, a 95% one, read
        as the same kind of figure)."""
        import warnings

        warnings.warn("Result.interval is the IQR; use Result.iqr", DeprecationWarning, stacklevel=2)
        return self.iqr

    @property
    def versions(self) -> dict[str, Any]:
        v = self.conditions.get("versions")
        return dict(v) if isinstance(v, Mapping) else {}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready): the figures above, and the full record under `result`."""
        return {
            "scenario": self.scenario,
            "configuration": self.configuration,
            "backend": self.backend,
            "device": self.device,
            "dtype": self.dtype,
            "size": self.size,
            "status": self.status,
            "message": self.message,
            "median_s": self.median,
            "iqr_s": list(self.iqr) if self.iqr else None,
            "other_mode": self.other_mode,
            "fresh_spread": self.fresh_spread,
            "n": len(self.samples),
            "speedup": self.speedup,
            "speedup_interval": list(self.speedup_interval) if self.speedup_interval else None,
            "baseline": self.baseline,
            "baseline_median_s": self.baseline_median,
            "check_ok": self.check_ok,
            "error": _finite(self.error),
            "tolerance": self.tolerance,
            "gflops": self.gflops,
            "gbps": self.gbps,
            "versions": self.versions,
            "notes": self.notes,
            "result": self.run_result.to_dict(),
        }

    def _row_dict(self) -> dict[str, Any]:
        d = self.to_dict()
        d.pop("result")
        d.pop("notes")
        d.pop("versions")
        other = d.pop("other_mode") or {}
        d["other_mode"], d["other_mode_median_s"] = other.get("name"), other.get("median_s")
        spread = d.pop("fresh_spread") or {}
        d["fresh_min_s"], d["fresh_max_s"] = spread.get("min_s"), spread.get("max_s")
        for key, base in (("iqr_s", "iqr"), ("speedup_interval", "speedup")):
            iv = d.pop(key)
            d[f"{base}_low"], d[f"{base}_high"] = (iv[0], iv[1]) if iv else (None, None)
        d.update({f"version_{k}": v for k, v in self.versions.items()})
        return d

    def _cells(self) -> list[str]:
        iv = self.iqr
        spread = f"{_fmt_time(iv[0])}–{_fmt_time(iv[1])}" if iv else "—"
        if self.speedup is None:
            speed = "—"
        else:
            speed = f"{'~' if self.speedup_note else ''}{self.speedup:.3g}×"
            if self.speedup_interval:
                speed += f" [{self.speedup_interval[0]:.3g}–{self.speedup_interval[1]:.3g}]"
        check = {True: "ok", False: "FAILED", None: "—"}[self.check_ok]
        if self.error is not None and math.isfinite(self.error):
            check += f" ({self.error:.1e})"
        median = self.status
        if self.median is not None:
            from gpuplay.core.reports.report import median_words

            median = median_words(self.median, self.fresh_spread or None, self.other_mode or None)
        return [
            self.scenario,
            self.size,
            self.configuration,
            median,
            spread,
            str(len(self.samples)),
            speed,
            check,
        ]

    HEAD = ["scenario", "size", "configuration", "median", "IQR", "n", "speedup vs NumPy CPU [95%]", "check"]

    def _conditions_line(self) -> str:
        v = self.versions
        parts = [f"{k} {v[k]}" for k in v if k != "device_uuid"]
        name = self.conditions.get("device_name")
        return "; ".join([*([str(name)] if name else []), *parts])

    def _repr_html_(self) -> str:
        return _html_table([self])

    def _repr_markdown_(self) -> str:
        return _md_table([self])

    def __repr__(self) -> str:
        # The cells hold a file's text when the result was loaded: shown, never sent to a terminal.
        cells = [visible(c, one_line=True) for c in self._cells()]
        return f"<gpuplay.Result {cells[0]} {cells[2]}: {cells[3]}, speedup {cells[6]}, check {cells[7]}>"


def _html_table(results: Sequence[Result], title: str = "") -> str:
    head = "".join(f"<th>{_h(c)}</th>" for c in Result.HEAD)
    body = "".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in r._cells()) + "</tr>" for r in results)
    notes = sorted(
        {
            line
            for r in results
            for line in (*r.notes, r.speedup_note, r.message if r.status != "ok" else "")
            if line
        }
    )
    conds = sorted({r._conditions_line() for r in results if r._conditions_line()})
    foot = "".join(f"<li>{_h(x)}</li>" for x in [*conds, *notes])
    cap = f"<caption>{_h(title)}</caption>" if title else ""
    return (
        f"<table class='gpuplay'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f"<ul style='font-size:smaller'>{foot}</ul>"
    )


def _md_table(results: Sequence[Result], title: str = "") -> str:
    lines = [f"**{_md(title)}**", ""] if title else []
    lines.append("| " + " | ".join(Result.HEAD) + " |")
    lines.append("|" + "---|" * len(Result.HEAD))
    lines += ["| " + " | ".join(_md(c) for c in r._cells()) + " |" for r in results]
    for c in sorted({r._conditions_line() for r in results if r._conditions_line()}):
        lines.append(f"\n{_md(c)}")
    return "\n".join(lines) + "\n"


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "to_pandas() needs pandas: pip install pandas (from a checkout: pip install -e '.[pandas]')"
        ) from None
    return pandas


class Results(Sequence[Result]):
    """Several measurements (a compare, a measure, a loaded file), each a Result, in order."""

    def __init__(
        self,
        results: Sequence[Result],
        *,
        refused: Sequence[tuple[str, str]] = (),
        interrupted: bool = False,
        environment: Mapping[str, Any] | None = None,
        source: str = "",
    ) -> None:
        self._items = list(results)
        self.refused = list(refused)  # (configuration, reason) never run
        self.interrupted = interrupted
        self.environment = dict(environment or {})
        self.source = source

    @classmethod
    def from_run_results(cls, results: Sequence[RunResult], **kw: Any) -> Results:
        from gpuplay.core.studies.compare import attach_baselines

        return cls([Result(row) for row in attach_baselines(list(results))], **kw)

    @overload
    def __getitem__(self, i: int) -> Result: ...
    @overload
    def __getitem__(self, i: slice) -> Results: ...
    def __getitem__(self, i: int | slice) -> Result | Results:
        if isinstance(i, slice):  # a part of the set: what was refused or interrupted stays said
            return Results(self._items[i], refused=self.refused, interrupted=self.interrupted,
                           environment=self.environment, source=self.source)  # fmt: skip
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Result]:
        return iter(self._items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "results": [r.to_dict() for r in self],
            "refused": [{"configuration": c, "reason": w} for c, w in self.refused],
            "interrupted": self.interrupted,
        }

    def to_pandas(self) -> Any:
        """One row per configuration: figures, intervals, check, versions (pandas: the extra)."""
        return _pandas().DataFrame([r._row_dict() for r in self])

    def compare(self, newer: Results | str | os.PathLike[str]) -> Comparison:
        """This set (older) against `newer` (a Results, or the path of a file gpuplay wrote, read
        with gpuplay.load): per configuration in both, faster, slower or within noise."""
        from gpuplay.core.reports import crossversion as cv
        from gpuplay.core.storage import argcheck

        if isinstance(newer, str | os.PathLike) and not isinstance(newer, Results):
            argcheck.expect_path("newer", newer, "a Results or a result file's path")
            import gpuplay  # its load(), the one reader of files (gpuplay.api sits above this module)

            loaded = gpuplay.load(os.fspath(newer))
            if not isinstance(loaded, Results):
                raise ValueError(
                    f"newer: {visible(os.fspath(newer))} holds a {type(loaded).__name__}, not measurements "
                    "to compare (a run, compare or measure export, or a session log)"
                )
            newer = loaded
        if not isinstance(newer, Results):
            raise TypeError(
                "newer takes a Results (from gpuplay.compare, measure or load) or a result file's path; "
                f"got {argcheck.shown(newer)} ({argcheck.kind_of(newer)})"
            )

        old = [r.run_result.to_dict() for r in self]
        new = [r.run_result.to_dict() for r in newer]
        changes = cv.compare_results(old, new)
        versions = cv.differing_versions(
            cv.versions_of(self.environment, old), cv.versions_of(newer.environment, new)
        )
        return Comparison(changes, versions)

    def _repr_html_(self) -> str:
        html_ = _html_table(list(self), self.source)
        if self.refused:
            html_ += "<p>refused: " + "; ".join(f"{_h(c)}: {_h(w)}" for c, w in self.refused) + "</p>"
        if self.interrupted:
            html_ += "<p><b>interrupted</b>: the measurements above are the ones that finished</p>"
        return html_

    def _repr_markdown_(self) -> str:
        return _md_table(list(self), self.source)

    def __repr__(self) -> str:
        return f"<gpuplay.Results: {len(self)} measurement(s){' (interrupted)' if self.interrupted else ''}>"


class Comparison:
    """Two result sets of different versions: `changes` (one per configuration in both) and
    `versions` (name, old, new) for what differs between them."""

    def __init__(self, changes: Sequence[Change], versions: Sequence[tuple[str, str, str]]) -> None:
        self.changes = list(changes)
        self.versions = list(versions)

    @property
    def notes(self) -> list[str]:
        """What the verdicts rest on: an interval within one run only (crossversion.WITHIN_RUN_NOTE)."""
        from gpuplay.core.reports import crossversion as cv

        return [cv.WITHIN_RUN_NOTE] if cv.within_run_only(self.changes) else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": [c.to_dict() for c in self.changes],
            "versions": [{"name": n, "old": a, "new": b} for n, a, b in self.versions],
            "notes": self.notes,
        }

    def to_pandas(self) -> Any:
        rows = []
        for c in self.changes:
            d = c.to_dict()
            iv = d.pop("interval")
            d["ratio_low"], d["ratio_high"] = (iv[0], iv[1]) if iv else (None, None)
            rows.append(d)
        return _pandas().DataFrame(rows)

    def text(self) -> str:
        lines = [visible(c.text(), one_line=True) for c in self.changes] or ["no configuration is in both"]
        if self.versions:
            lines.append("versions that differ: " + "; ".join(f"{n} {a} → {b}" for n, a, b in self.versions))
        else:
            lines.append("versions: the same in both (as far as the files say)")
        lines.extend(f"note: {n}" for n in self.notes)
        return visible("\n".join(lines))

    def _repr_html_(self) -> str:
        """One row per configuration in both sets; every cell escaped (the labels are a file's)."""
        head = "".join(f"<th>{h}</th>" for h in ("scenario", "size", "configuration", "old", "new", "new/old",
                                                  "95% interval", "verdict"))  # fmt: skip
        body = ""
        for c in self.changes:
            ratio, low, high = _finite(c.ratio), _finite(c.low), _finite(c.high)
            cells = [*c.key, _fmt_time(_finite(c.old_median)), _fmt_time(_finite(c.new_median)),
                     "—" if ratio is None else f"×{ratio:.3f}",
                     "—" if low is None or high is None else f"{low:.3f}–{high:.3f} ({c.interval})",
                     c.verdict + (f": {c.note}" if c.note else "")]  # fmt: skip
            body += "<tr>" + "".join(f"<td>{_h(x)}</td>" for x in cells) + "</tr>"
        if not self.changes:
            body = "<tr><td colspan='8'>no configuration is in both</td></tr>"
        versions = (
            "versions that differ: " + "; ".join(f"{n} {a} → {b}" for n, a, b in self.versions)
            if self.versions
            else "versions: the same in both (as far as the files say)"
        )
        notes = "".join(f"<p>{_h(n)}</p>" for n in self.notes)
        return f"<table class='gpuplay'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><p>{_h(versions)}</p>{notes}"

    def _repr_markdown_(self) -> str:
        return "\n\n".join(_md(line) for line in self.text().splitlines())

    def __repr__(self) -> str:
        return self.text()


class Table(Sequence[dict[str, Any]]):
    """Rows of a file gpuplay wrote that holds no measurements to rebuild: a CSV (text cells, no
    samples), a collectives JSON, a `compare --from --format json` merge."""

    def __init__(self, rows: Sequence[dict[str, Any]], source: str = "") -> None:
        self.rows, self.source = list(rows), source

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self.rows[i]

    def __len__(self) -> int:
        return len(self.rows)

    def to_pandas(self) -> Any:
        return _pandas().DataFrame(self.rows)

    def _repr_html_(self) -> str:
        """The rows as a table, every cell and heading escaped (a CSV's text is the file's, any
        text at all); at most MAX_HTML_ROWS of them, so a huge file cannot stall a notebook."""
        columns: dict[str, None] = {}
        for row in self.rows:
            columns.update(dict.fromkeys(str(k) if k is not None else "(extra)" for k in row))
        head = "".join(f"<th>{_h(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{_h(_cell(row, c))}</td>" for c in columns) + "</tr>"
            for row in self.rows[:MAX_HTML_ROWS]
        )
        cap = f"<caption>{_h(self.source)}</caption>" if self.source else ""
        more = len(self.rows) - MAX_HTML_ROWS
        tail = f"<p>… {more} more row(s): to_pandas() has them all</p>" if more > 0 else ""
        return (
            f"<table class='gpuplay'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{tail}"
        )

    def __repr__(self) -> str:
        return f"<gpuplay.Table: {len(self)} row(s) from {visible(self.source)}>"


_NO_MATPLOTLIB = (
    "plot() needs matplotlib: pip install matplotlib (from a checkout: pip install -e '.[notebook]')"
)
MAX_HTML_ROWS = 500  # a Table's rows shown in a notebook; the rest counted


def _cell(row: Mapping[Any, Any], column: str) -> object:
    """A Table row's value under a heading ("(extra)": the cells a CSV row had beyond its header)."""
    value = row.get(None) if column == "(extra)" and column not in row else row.get(column, "")
    return "" if value is None else value


class Sweep:
    """A size sweep: `param`, `values`, one series per configuration, fits and crossovers.
    `to_pandas()` gives one row per (configuration, size); `plot()` a matplotlib figure."""

    def __init__(self, doc: Mapping[str, Any], environment: Mapping[str, Any] | None = None) -> None:
        self.doc = dict(doc)
        self.environment = dict(environment or {})
        self.scenario = str(doc.get("scenario") or "")
        self.param = str(doc.get("param") or "")
        self.values = list(doc.get("values") or [])
        self.series: list[dict[str, Any]] = [s for s in doc.get("series") or [] if isinstance(s, dict)]
        self.crossovers: list[dict[str, Any]] = [
            c for c in doc.get("crossovers") or [] if isinstance(c, dict)
        ]
        self.refused = [
            (str(x.get("label")), str(x.get("reason")))
            for x in doc.get("refused") or []
            if isinstance(x, dict)
        ]
        self.interrupted = bool(doc.get("interrupted"))

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment, "sweep": self.doc}

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for s in self.series:
            for p in s.get("points") or []:
                if isinstance(p, dict):
                    out.append({
                        "configuration": s.get("label"), "backend": s.get("backend"), "device": s.get("device"),
                        "dtype": s.get("dtype"), "median_s": _finite(p.get("median")),
                        "low_s": _finite(p.get("low")), "high_s": _finite(p.get("high")),
                        "samples": p.get("n"), "gflops": _finite(p.get("gflops")), "gbps": _finite(p.get("gbps")),
                        "status": p.get("status"),
                        # last: the swept parameter's column wins over any of the above of its name
                        self.param or "value": p.get("value"),
                    })  # fmt: skip
        return out

    def to_pandas(self) -> Any:
        return _pandas().DataFrame(self.rows())

    def plot(self, ax: Any = None) -> Any:
        """Time per step against the parameter, one line per configuration, log-log, with the IQR
        as a band, on `ax` or a new pyplot figure (left open: `plt.show()` or a notebook shows it).
        Needs matplotlib; returns the Axes, as pandas' plot() does."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError(_NO_MATPLOTLIB) from None
        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 4.0))
        self._draw(ax)
        return ax

    def _figure(self) -> Any:
        """The chart on a Figure of its own, outside pyplot (for the HTML display: no open figure
        left behind for a notebook to show a second time)."""
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError(_NO_MATPLOTLIB) from None
        fig = Figure(figsize=(6.4, 4.0))
        self._draw(fig.add_subplot())
        return fig

    def _draw(self, ax: Any) -> None:
        for s in self.series:
            pts = [p for p in s.get("points") or [] if isinstance(p, dict) and _finite(p.get("median"))]
            if not pts:
                continue
            xs = [float(p["value"]) for p in pts]
            label = visible(s.get("label"), one_line=True).replace("$", r"\$")  # no mathtext from a file
            ax.plot(xs, [p["median"] for p in pts], marker="o", label=label)
            lows = [_finite(p.get("low")) or p["median"] for p in pts]
            highs = [_finite(p.get("high")) or p["median"] for p in pts]
            ax.fill_between(xs, lows, highs, alpha=0.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(visible(self.param, one_line=True).replace("$", r"\$"))
        ax.set_ylabel("seconds per step (median)")
        ax.set_title(visible(self.scenario, one_line=True).replace("$", r"\$"))
        ax.legend(fontsize="small")

    def text_chart(self, width: int = 40) -> str:
        """The sweep as text: one bar per point, log-scaled (where matplotlib is not installed)."""
        rows = [r for r in self.rows() if r["median_s"]]
        if not rows:
            return "(no measured points)"
        lo = min(math.log10(r["median_s"]) for r in rows)
        hi = max(math.log10(r["median_s"]) for r in rows)
        span = (hi - lo) or 1.0
        lines = []
        for r in rows:
            n = 1 + round((width - 1) * (math.log10(r["median_s"]) - lo) / span)
            name = f"{r['configuration']} {self.param}={r[self.param or 'value']}"
            lines.append(f"{visible(name, one_line=True)[:48]:<48} {'█' * n} {_fmt_time(r['median_s'])}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from gpuplay.core.reports import sweepreport as sr

        head = "".join(f"<th>{_h(s.get('label'))}</th>" for s in self.series)
        body = "".join(
            f"<tr><td>{_h(sr.fmt_value(v))}</td>"
            + "".join(f"<td>{_h(sr.cell(p))}</td>" for p in points)
            + "</tr>"
            for v, points in sr.rows(self.doc)
        )
        out = f"<table class='gpuplay'><thead><tr><th>{_h(self.param)}</th>{head}</tr></thead><tbody>{body}</tbody></table>"
        out += "".join(f"<p>crossover: {_h(sr.crossover_text(c))}</p>" for c in self.crossovers)
        try:
            import base64

            fig = self._figure()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            out += f"<img alt='sweep chart' src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'/>"
        except ImportError:
            out += f"<pre>{html.escape(self.text_chart())}</pre>"
        return out

    def _repr_markdown_(self) -> str:
        from gpuplay.core.reports import sweepreport as sr

        return sr.to_markdown(self.doc, None)

    def __repr__(self) -> str:
        return f"<gpuplay.Sweep {visible(self.scenario)} over {visible(self.param)}: {len(self.series)} series>\n{self.text_chart()}"


class Ladder:
    """`gpuplay.tune`'s answer: the levers checklist climbed on one target, one change at a time.

    `rungs` are dicts in the fixed order (name, configuration, status measured/dropped/refused,
    kept, reason, median seconds, speedup over the previous kept rung and its 95% interval,
    cumulative, error vs float64); `kept` the kept ones after the baseline; `verdict` one line;
    `speedup`/`speedup_interval` the winner timed against the baseline side by side.
    """

    def __init__(self, ladder: Any) -> None:
        from gpuplay.core.studies.tune import COLUMNS, table_rows

        d = ladder.to_dict()
        self._doc = d
        self._columns = COLUMNS
        self._cells = table_rows(ladder)
        self.target: str = d["target"]
        self.device: str = d["device"]
        self.rungs: list[dict[str, Any]] = d["rungs"]
        self.kept: list[dict[str, Any]] = [r for r in self.rungs[1:] if r["kept"]]
        self.verdict: str = d["verdict"]
        self.limit: str = d["limit"]
        self.interrupted: bool = d["interrupted"]
        total = d.get("total") or {}
        self.speedup: float | None = _finite(total.get("speedup"))
        iv = total.get("interval")
        self.speedup_interval: tuple[float, float] | None = (iv[0], iv[1]) if iv else None
        self.winner: str | None = self.kept[-1]["configuration"] if self.kept else None

    def to_dict(self) -> dict[str, Any]:
        return dict(self._doc)

    def to_pandas(self) -> Any:
        keys = ("name", "configuration", "status", "kept", "reason", "median", "speedup", "interval",
                "cumulative", "error", "tolerance", "compile_s", "build_s")  # fmt: skip
        return _pandas().DataFrame([{k: r.get(k) for k in keys} for r in self.rungs])

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{_h(c)}</th>" for c in self._columns)
        body = "".join("<tr>" + "".join(f"<td>{_h(c)}</td>" for c in row) + "</tr>" for row in self._cells)
        cap = f"<caption>gpuplay tune {_h(self.target)} on {_h(self.device)}</caption>"
        return (
            f"<table class='gpuplay'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p>{_h(self.verdict)}</p>"
        )

    def _repr_markdown_(self) -> str:
        lines = ["| " + " | ".join(self._columns) + " |", "|" + "---|" * len(self._columns)]
        lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in self._cells]
        return "\n".join([*lines, "", _md(self.verdict)])

    def __repr__(self) -> str:
        return f"<gpuplay.Ladder {visible(self.target)} on {self.device}: {visible(self.verdict)}>"
