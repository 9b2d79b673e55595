"""gpuplay from Python: `run`, `compare`, `sweep`, `measure` and `load`.

A thin face over what the CLI uses: the same scenario files, planner (`core.planner.check`),
engine process (`core.engine.measure`), NumPy baselines and pairing (`core.compare`), sweep plan
(`core.sweep`) and session log. Nothing here imports torch or CuPy: the engine process does.
docs/python-api.md describes every name.
"""

from __future__ import annotations

import csv
import html
import inspect
import io
import math
import re
import tempfile
import textwrap
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from gpuplay import progress as _progress
from gpuplay.core.safetext import visible

if TYPE_CHECKING:
    from gpuplay.core.compare import Row
    from gpuplay.core.crossversion import Change
    from gpuplay.core.result import RunResult
    from gpuplay.core.scenarios import Scenario
    from gpuplay.core.spec import RunSpec

__all__ = [
    "Comparison",
    "MeasurementError",
    "Refused",
    "Result",
    "Results",
    "Sweep",
    "Table",
    "compare",
    "load",
    "measure",
    "run",
    "sweep",
]

PROBE_TIMEOUT_S = 30.0
# The RunSpec fields run() takes as its own arguments; every other spec lever is a keyword.
_OWN = ("backend", "device", "dtype", "budget_s")


class Refused(Exception):
    """The configuration cannot run here; `reason` says why, `hint` what to do instead."""

    def __init__(self, reason: str, hint: str = "", configuration: str = "") -> None:
        self.reason, self.hint, self.configuration = reason, hint, configuration
        text = f"{configuration}: {reason}" if configuration else reason
        super().__init__(f"{text} ({hint})" if hint else text)


class MeasurementError(RuntimeError):
    """The measurement ran and failed (out of memory, an exception in the step, a compile
    error); `result` holds what it recorded."""

    def __init__(self, message: str, result: Result) -> None:
        super().__init__(message)
        self.result = result


# -- what comes back ---------------------------------------------------------------------------
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
    from gpuplay.core.report import fmt_time

    return fmt_time(s)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


class Result:
    """One measurement: its figures, its check against float64, and what it ran on.

    `median` is seconds per step; `interval` the 25th–75th percentile of the step times (the ±
    the CLI prints is half its width); `speedup` is over NumPy on the CPU, measured in interleaved
    pairs, with its 95% `speedup_interval`; `conditions` includes `versions` (gpuplay, Python,
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
        self.interval: tuple[float, float] | None = (s.p25, s.p75) if s else None
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
            "interval_s": list(self.interval) if self.interval else None,
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
        for key, base in (("interval_s", "interval"), ("speedup_interval", "speedup")):
            iv = d.pop(key)
            d[f"{base}_low"], d[f"{base}_high"] = (iv[0], iv[1]) if iv else (None, None)
        d.update({f"version_{k}": v for k, v in self.versions.items()})
        return d

    def _cells(self) -> list[str]:
        iv = self.interval
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
        median = _fmt_time(self.median) if self.median is not None else self.status
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
        cells = self._cells()
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
        raise ImportError("to_pandas() needs pandas: pip install 'gpuplay[pandas]'") from None
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
        from gpuplay.core.compare import attach_baselines

        return cls([Result(row) for row in attach_baselines(list(results))], **kw)

    @overload
    def __getitem__(self, i: int) -> Result: ...
    @overload
    def __getitem__(self, i: slice) -> Results: ...
    def __getitem__(self, i: int | slice) -> Result | Results:
        if isinstance(i, slice):
            return Results(self._items[i], environment=self.environment, source=self.source)
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

    def compare(self, newer: Results) -> Comparison:
        """This set (older) against `newer`: per configuration in both, faster, slower or within noise."""
        from gpuplay.core import crossversion as cv

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "changes": [c.to_dict() for c in self.changes],
            "versions": [{"name": n, "old": a, "new": b} for n, a, b in self.versions],
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
        return visible("\n".join(lines))

    def _repr_markdown_(self) -> str:
        return "\n\n".join(_md(line) for line in self.text().splitlines())

    def __repr__(self) -> str:
        return self.text()


class Table(Sequence[dict[str, str]]):
    """A CSV file gpuplay wrote, as rows of text (CSV holds no samples; JSON files do)."""

    def __init__(self, rows: Sequence[dict[str, str]], source: str = "") -> None:
        self.rows, self.source = list(rows), source

    @overload
    def __getitem__(self, i: int) -> dict[str, str]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, str]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, str] | list[dict[str, str]]:
        return self.rows[i]

    def __len__(self) -> int:
        return len(self.rows)

    def to_pandas(self) -> Any:
        return _pandas().DataFrame(self.rows)

    def __repr__(self) -> str:
        return f"<gpuplay.Table: {len(self)} row(s) from {visible(self.source)}>"


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
        as a band. Needs matplotlib; returns its Figure."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("plot() needs matplotlib: pip install 'gpuplay[notebook]'") from None
        fig = None
        if ax is None:
            fig, ax = plt.subplots(figsize=(6.4, 4.0))
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
        if fig is not None:
            plt.close(fig)  # shown by the caller (or a notebook's display), not twice
        return fig if fig is not None else ax.figure

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
        from gpuplay.core import sweepreport as sr

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

            fig = self.plot()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            out += f"<img alt='sweep chart' src='data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}'/>"
        except ImportError:
            out += f"<pre>{html.escape(self.text_chart())}</pre>"
        return out

    def _repr_markdown_(self) -> str:
        from gpuplay.core import sweepreport as sr

        return sr.to_markdown(self.doc, None)

    def __repr__(self) -> str:
        return f"<gpuplay.Sweep {visible(self.scenario)} over {visible(self.param)}: {len(self.series)} series>\n{self.text_chart()}"


# -- measuring -----------------------------------------------------------------------------------
def _scenario(name: str | Path, scenario_dirs: Sequence[str | Path] = ()) -> Scenario:
    from gpuplay.core.config import load_config
    from gpuplay.core.scenarios import code_scenario, load_scenarios
    from gpuplay.core.workloads.usercode import UserCodeError

    arg = str(name)
    try:
        sc = code_scenario(arg)
    except (UserCodeError, OSError, SyntaxError) as exc:
        raise ValueError(f"code file {arg!r}: {exc}") from None
    if sc is not None:
        return sc
    cfg = load_config()
    sset = load_scenarios([*cfg.scenario_dirs, *scenario_dirs])
    for problem in [
        *cfg.problems,
        *(f"scenario {e.path}: {e.field + ': ' if e.field else ''}{e.detail}" for e in sset.errors),
    ]:
        warnings.warn(visible(problem), stacklevel=3)
    if arg not in sset.scenarios:
        raise ValueError(f"unknown scenario {arg!r}; known: {', '.join(sset.scenarios)}")
    return sset.scenarios[arg]


def _check_lever(name: str, value: Any) -> None:
    """A lever keyword's value of the right kind and within its bounds (the CLI's click types do
    this for flags); RunSpec.validate then checks choices."""
    from gpuplay.core import bounds, levers

    lever = levers.BY_NAME.get(name)
    if lever is None or lever.is_param:
        known = ", ".join(lv.name for lv in levers.spec_levers() if lv.name not in _OWN)
        raise ValueError(f"unknown lever {name!r}; known: {known} (workload parameters go in params=)")
    if value is None:  # not given: the spec's default
        return
    if lever.kind is bool:
        ok = isinstance(value, bool)
    elif lever.kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif lever.kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, lever.kind)
    if not ok:
        raise ValueError(f"{name} must be {lever.kind.__name__}; got {value!r}")
    if lever.choices and value not in lever.choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, lever.choices))}; got {value!r}")
    limits = lever.limits() if callable(lever.limits) else lever.limits
    if limits is not None and lever.kind in (int, float):
        try:
            bounds.check_number(name, value, limits, integer=lever.kind is int)
        except bounds.BoundsError as exc:
            raise ValueError(str(exc)) from None


def _spec(
    sc: Scenario, preset: str | None, params: Mapping[str, Any] | None, fields: Mapping[str, Any]
) -> tuple[RunSpec, str]:
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.workloads import get_workload

    for name, value in fields.items():
        _check_lever(name, value)
    if "budget_s" in fields and fields["budget_s"] is not None:
        b = fields["budget_s"]
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b):
            raise ValueError(f"budget_s must be a finite number of seconds; got {b!r}")
    try:
        merged = {**sc.preset_params(preset), **dict(params or {})}
        workload = get_workload(sc.workload)
        resolved = workload.resolve(merged)
        spec = RunSpec.make(
            sc.workload, resolved, scenario=sc.name, **{k: v for k, v in fields.items() if v is not None}
        )
        return spec, workload.size_label(resolved)
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None


def _adopt_probe(gpu: bool) -> None:
    from gpuplay.core.engine.client import adopt_shared_probe

    adopt_shared_probe(PROBE_TIMEOUT_S, final=gpu)  # starts the engine; it imports torch, not us


def _interruptible(work: Callable[[threading.Event], Any], cancel: threading.Event) -> tuple[Any, bool]:
    """Run `work` in a thread so a KeyboardInterrupt (a notebook's interrupt button, Ctrl-C) reaches
    this one: the cancel then stops the engine within one step (or the client replaces it), and
    what finished is kept. Returns (work's value, whether it was interrupted)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name="gpuplay-measure", daemon=True)
    t.start()
    interrupted = False
    while t.is_alive():
        try:
            t.join(0.1)
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
    if "error" in box:
        raise box["error"]
    return box.get("value"), interrupted


def _log(results: Sequence[RunResult]) -> None:
    """Into this process's session log, as the CLI does (gpuplay history reads it)."""
    from gpuplay.core.sessionlog import SessionLog

    log = _session_log[0] if _session_log else None
    if log is None:
        log = SessionLog()
        _session_log.append(log)
    for r in results:
        if r.usable:
            log.append(r)


_session_log: list[Any] = []


def run(
    scenario: str | Path,
    *,
    backend: str = "numpy",
    device: str = "cpu",
    dtype: str | None = None,
    preset: str | None = None,
    params: Mapping[str, Any] | None = None,
    budget_s: float | None = None,
    baseline: bool = True,
    scenario_dirs: Sequence[str | Path] = (),
    **levers: Any,
) -> Result:
    """Time one scenario (or code file) in one configuration, as `gpuplay run` does.

    With `baseline` (the default) a configuration other than NumPy on the CPU is timed in
    interleaved pairs with that baseline, so the Result has a speedup with its 95% interval.
    Raises Refused when the configuration cannot run here, ValueError for an unknown scenario,
    lever or parameter or a bad value (NaN budget_s included), MeasurementError when it failed.
    Interrupting (Ctrl-C, a notebook's stop button) stops it and returns what was timed.
    """
    from gpuplay.core.compare import attach_baselines, baseline_spec, is_baseline
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.planner import check
    from gpuplay.core.spec import Refusal
    from gpuplay.core.telemetry import RunTelemetry

    sc = _scenario(scenario, scenario_dirs)
    fields = {"backend": backend, "device": device, "dtype": dtype, "budget_s": budget_s, **levers}
    spec, size = _spec(sc, preset, params, fields)
    _adopt_probe(spec.backend == "cupy" or spec.device != "cpu")
    verdict = check(spec, probe_timeout=PROBE_TIMEOUT_S)
    if isinstance(verdict, Refusal):
        raise Refused(verdict.reason, verdict.hint, spec.label())
    pair = baseline_spec(spec) if baseline and not is_baseline(spec) else None
    telemetry = RunTelemetry()
    r, interrupted = _interruptible(
        lambda cancel: engine_measure(spec, cancel=cancel, telemetry=telemetry, paired_with=pair),
        threading.Event(),
    )
    if not interrupted:
        _log([r])  # as the CLI: the measurement an interrupt stopped is not a finished one
    result = Result(attach_baselines([r])[0])
    if interrupted:
        warnings.warn(f"interrupted: {len(r.samples)} step(s) of {spec.label()} were timed", stacklevel=2)
    elif r.status == "refused":
        raise Refused(r.message, "", spec.label())
    elif r.status == "failed":
        raise MeasurementError(visible(f"{spec.label()}: {r.message}"), result)
    return result


def _run_specs(specs: Sequence[RunSpec], show_progress: bool) -> tuple[list[RunResult], bool]:
    """Each spec in turn, each non-baseline paired with its baseline (core.compare.run_compare),
    logged as it finishes; an interrupt keeps what finished."""
    from gpuplay.core.compare import run_compare
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.report import fmt_time
    from gpuplay.core.telemetry import RunTelemetry

    bar = _progress.make(len(specs), show_progress)
    done: list[RunResult] = []

    def on_result(i: int, r: RunResult) -> None:
        if r.status == "cancelled":
            return  # stopped by the interrupt: not a finished measurement
        done.append(r)
        _log([r])
        if bar is not None:
            what = fmt_time(r.median) if r.status == "ok" else f"{r.status}: {r.message}"
            bar.step(f"{r.spec.scenario} {r.spec.label()}: {what}")

    try:
        _, interrupted = _interruptible(
            lambda cancel: run_compare(
                specs, cancel=cancel, on_result=on_result, telemetry=RunTelemetry(), measure=engine_measure
            ),  # fmt: skip
            threading.Event(),
        )
    finally:
        if bar is not None:
            bar.close()
    return done, interrupted


def _names(value: str | Sequence[str], what: str, allowed: Sequence[str] | None) -> list[str]:
    items = [value] if isinstance(value, str) else list(value)
    items = [str(x).strip() for x in items if str(x).strip()]
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad or not items:
        raise ValueError(
            f"unknown {what} {', '.join(map(repr, bad)) or '(none given)'}; choose from {', '.join(allowed or ())}"
        )
    return list(dict.fromkeys(items))


def _compare_scenarios(
    scenarios: Sequence[Scenario],
    *,
    backends: str | Sequence[str],
    devices: str | Sequence[str] | None,
    variants: str | Sequence[str],
    dtype: str,
    preset: str | None,
    budget_s: float | None,
    threads: int | None,
    max_step_s: float | None,
    progress: bool,
) -> Results:
    from gpuplay.core.compare import VARIANTS, plan_compare
    from gpuplay.core.report import environment
    from gpuplay.core.spec import BACKENDS

    chosen = _names(backends, "backend(s)", BACKENDS)
    vlist = _names(variants, "variant(s)", tuple(VARIANTS))
    kw = {
        k: v
        for k, v in (("budget_s", budget_s), ("threads", threads), ("max_step_s", max_step_s))
        if v is not None
    }
    fields = {"dtype": dtype, **kw}
    for name, value in fields.items():
        _check_lever(name, value)
    devs = None if devices is None else _names(devices, "device(s)", None)
    try:
        for sc in scenarios:
            sc.preset_params(preset)
        _adopt_probe("cupy" in chosen or any(d != "cpu" for d in devs or ()))
        specs, refused = plan_compare(scenarios, preset, chosen, dtype=dtype, variants=vlist, **kw)
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None
    if devs is not None:
        from gpuplay.core.compare import is_baseline

        specs = [s for s in specs if s.device in devs or is_baseline(s)]
        refused = [(s, w) for s, w in refused if s.device in devs]
    done, interrupted = _run_specs(specs, progress)
    if interrupted:
        warnings.warn(f"interrupted: {len(done)} of {len(specs)} measurements finished", stacklevel=3)
    return Results.from_run_results(
        done,
        refused=[(f"{s.scenario}: {s.label()}", str(w)) for s, w in refused],
        interrupted=interrupted,
        environment=environment(),
    )


def compare(
    scenario: str | Path | Sequence[str | Path] | None,
    *,
    backends: str | Sequence[str] = ("numpy", "torch", "cupy"),
    devices: str | Sequence[str] | None = None,
    variants: str | Sequence[str] = ("base",),
    dtype: str = "float32",
    preset: str | None = "quick",
    budget_s: float | None = None,
    threads: int | None = None,
    max_step_s: float | None = None,
    scenario_dirs: Sequence[str | Path] = (),
    progress: bool = True,
) -> Results:
    """A scenario (a list of them, or None for all) on each backend and device that can run it,
    each paired with NumPy on the CPU, as `gpuplay compare` does. Configurations that cannot run
    here are in `Results.refused` with the reason. An interrupt keeps what finished."""
    if scenario is None:
        from gpuplay.core.config import load_config
        from gpuplay.core.scenarios import load_scenarios

        scs = list(load_scenarios([*load_config().scenario_dirs, *scenario_dirs]).scenarios.values())
    elif isinstance(scenario, str | Path):
        scs = [_scenario(scenario, scenario_dirs)]
    else:
        scs = [_scenario(s, scenario_dirs) for s in scenario]
    return _compare_scenarios(scs, backends=backends, devices=devices, variants=variants, dtype=dtype,
                              preset=preset, budget_s=budget_s, threads=threads, max_step_s=max_step_s,
                              progress=progress)  # fmt: skip


def sweep(
    scenario: str | Path,
    over: Mapping[str, Sequence[float] | str],
    *,
    backends: str | Sequence[str] = ("numpy", "torch"),
    devices: str | Sequence[str] = ("cpu",),
    dtypes: str | Sequence[str] = ("float32",),
    variants: str | Sequence[str] = ("base",),
    transfers: str = "off",
    preset: str | None = "quick",
    budget_s: float = 0.5,
    warmup: int = 3,
    threads: int | None = None,
    max_step_s: float = 10.0,
    scenario_dirs: Sequence[str | Path] = (),
    progress: bool = True,
) -> Sweep:
    """Each configuration at each value of one parameter, smallest first, as `gpuplay sweep`:
    `over={"n": [256, 512, 1024]}` or `over={"n": "256..4096"}`. An interrupt keeps what finished."""
    from gpuplay.core.engine import measure as engine_measure
    from gpuplay.core.report import environment, fmt_time
    from gpuplay.core.spec import BACKENDS, DTYPES
    from gpuplay.core.sweep import VARIANTS, SweepError, plan_sweep, run_sweep, sweep_values
    from gpuplay.core.telemetry import RunTelemetry

    if not isinstance(over, Mapping) or len(over) != 1:
        raise ValueError("over must name one parameter: over={'n': [256, 512, 1024]}")
    ((param, raw),) = over.items()
    sc = _scenario(scenario, scenario_dirs)
    chosen = _names(backends, "backend(s)", BACKENDS)
    devs = _names(devices, "device(s)", None)
    dts = _names(dtypes, "dtype(s)", DTYPES)
    vs = _names(variants, "variant(s)", tuple(VARIANTS))
    for name, value in (
        ("budget_s", budget_s),
        ("warmup", warmup),
        ("threads", threads),
        ("max_step_s", max_step_s),
    ):
        _check_lever(name, value)
    try:
        text = raw if isinstance(raw, str) else ",".join(str(v) for v in raw)
        values = sweep_values(sc, str(param), text)
        _adopt_probe("cupy" in chosen or any(d != "cpu" for d in devs))
        plan = plan_sweep(sc, str(param), values, chosen, devs, preset=preset, dtypes=dts, variants=vs,
                          transfers=transfers, budget_s=budget_s, warmup=warmup, threads=threads,
                          max_step_s=max_step_s)  # fmt: skip
    except SweepError as exc:
        raise ValueError(f"over: {exc}") from None
    except KeyError as exc:
        raise ValueError(str(exc.args[0]) if exc.args else str(exc)) from None
    bar = _progress.make(plan.total, progress)

    def on_point(series: Any, point: Any) -> None:
        if point.result is not None:
            _log([point.result])
        if bar is not None:
            what = fmt_time(point.median) if point.median else f"{point.status}: {point.message}"
            bar.step(f"{series.label} {param}={point.value}: {what}")

    try:
        _, interrupted = _interruptible(
            lambda cancel: run_sweep(
                plan, engine_measure, cancel=cancel, on_point=on_point, telemetry=RunTelemetry()
            ),
            threading.Event(),
        )
    finally:
        if bar is not None:
            bar.close()
    plan.interrupted = plan.interrupted or interrupted
    if interrupted:
        warnings.warn("interrupted: the sweep keeps the points that finished", stacklevel=2)
    return Sweep(plan.to_dict(), environment())


# The notebook functions' files: kept until the kernel exits (the engine reads them by path).
_code_dir: list[tempfile.TemporaryDirectory[str]] = []


def _module_imports(*functions: Callable[..., Any]) -> list[str]:
    """`import numpy as np` for each module a function names from its globals, so its source
    runs in the engine's file as it ran in the notebook."""
    lines = []
    for f in functions:
        for name in f.__code__.co_names:
            value = f.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                line = f"import {value.__name__}" + ("" if value.__name__ == name else f" as {name}")
                if line not in lines:
                    lines.append(line)
    return lines


def code_file(
    step: Callable[..., Any],
    inputs: Callable[..., Any],
    params: Mapping[str, Any] | None = None,
    presets: Mapping[str, Mapping[str, Any]] | None = None,
    name: str | None = None,
) -> Path:
    """A code file (docs/your-code.md) from two functions' source: their text, the modules they
    name, PARAMS and PRESETS. Closures and other globals do not travel: only source does."""
    try:
        # Each def renamed to what the protocol names (the file is read without running it, so
        # `step = saxpy` would not be seen).
        sources = [
            re.sub(
                rf"^def\s+{re.escape(f.__name__)}\s*\(",
                f"def {role}(",
                textwrap.dedent(inspect.getsource(f)),
                count=1,
                flags=re.M,
            )  # fmt: skip
            for f, role in ((inputs, "inputs"), (step, "step"))
        ]
    except (OSError, TypeError) as exc:
        raise ValueError(
            f"cannot read the functions' source ({exc}); define them with def in a cell or file"
        ) from None
    for f in (inputs, step):
        if f.__code__.co_freevars:
            raise ValueError(
                f"{f.__name__} uses variables of an enclosing function ({', '.join(f.__code__.co_freevars)}); define it at the top level"
            )
    stem = name or step.__name__
    if not stem.isidentifier():
        raise ValueError(f"name must be an identifier; got {stem!r}")
    doc = (inspect.getdoc(step) or f"{stem}: a function measured from Python").replace('"""', "'''")
    text = "\n".join([
        f'"""{doc}"""', *_module_imports(inputs, step),
        f"PARAMS = {dict(params or {})!r}", f"PRESETS = {dict(presets or {})!r}", "", *sources,
        "",
    ])  # fmt: skip
    if not _code_dir:
        _code_dir.append(tempfile.TemporaryDirectory(prefix="gpuplay-measure-"))
    path = Path(_code_dir[0].name) / f"{stem}.py"
    path.write_text(text, encoding="utf-8")
    return path


def measure(
    step: Callable[..., Any],
    inputs: Callable[..., Any],
    *,
    params: Mapping[str, Any] | None = None,
    backends: str | Sequence[str] = ("numpy", "torch"),
    devices: str | Sequence[str] | None = None,
    dtype: str = "float32",
    budget_s: float | None = None,
    name: str | None = None,
    progress: bool = True,
) -> Results:
    """Time a function defined in the notebook on each backend, each paired with NumPy on the CPU:
    `inputs(rng, **params)` returns NumPy arrays, `step(xp, *arrays)` is the timed work on the
    backend's array namespace (docs/your-code.md). Their source is written to a code file the
    engine process runs, so they must be self-contained: modules they use are imported there too,
    other globals are not."""
    path = code_file(step, inputs, params, name=name)
    sc = _scenario(path)
    return _compare_scenarios([sc], backends=backends, devices=devices, variants=("base",), dtype=dtype,
                              preset=None, budget_s=budget_s, threads=None, max_step_s=None,
                              progress=progress)  # fmt: skip


# -- reading files back --------------------------------------------------------------------------
def _read_json(p: Path) -> Any:
    from gpuplay.core.safeload import FileReadError, json_loads, read_text_file

    try:
        return json_loads(read_text_file(p))
    except FileReadError as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:
        raise ValueError(f"{p}: not JSON ({exc})") from None


def _results_from(dicts: Sequence[Any], p: Path, problems: list[str]) -> list[RunResult]:
    from gpuplay.core.result import RunResult

    out = []
    for i, d in enumerate(dicts, 1):
        if not isinstance(d, dict) or not isinstance(d.get("spec"), dict):
            continue
        try:
            out.append(RunResult.from_dict(d))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(f"{p}: result {i} skipped ({exc})")
    return out


def load(path: str | Path) -> Results | Sweep | Table:
    """A file gpuplay wrote, read back: a session log (.jsonl) or a run/compare/playground export
    (JSON) → Results; a sweep's JSON → Sweep; any CSV gpuplay writes → Table (rows of text). A file
    that is not one of these raises ValueError saying what it is."""
    from gpuplay.core.safeload import FileReadError, read_text_file
    from gpuplay.core.sessionlog import read_log

    p = Path(path).expanduser()
    problems: list[str] = []
    if p.suffix == ".jsonl":
        results = _results_from(list(read_log(p, problems)), p, problems)
        if not p.is_file():
            raise ValueError(f"{p}: no such file")
        out: Results | Sweep | Table = Results.from_run_results(results, source=p.name)
    elif p.suffix == ".csv":
        try:
            text = read_text_file(p)
        except FileReadError as exc:
            raise ValueError(str(exc)) from None
        out = Table(list(csv.DictReader(io.StringIO(text))), source=p.name)
    elif p.suffix in (".md", ".markdown"):
        raise ValueError(f"{p}: Markdown is for reading; load the same results' --format json file")
    else:
        doc = _read_json(p)
        if isinstance(doc, dict) and isinstance(doc.get("sweep"), dict):
            out = Sweep(
                doc["sweep"], doc.get("environment") if isinstance(doc.get("environment"), dict) else None
            )
        elif (
            isinstance(doc, dict)
            and isinstance(doc.get("results"), list)
            and doc.get("kind") != "gpuplay-collectives"
        ):
            env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
            results = _results_from(doc["results"], p, problems)
            if not results and doc["results"]:
                raise ValueError(f"{p}: its results are not gpuplay measurements (no 'spec')")
            out = Results.from_run_results(results, environment=env, source=p.name)
        else:
            raise ValueError(
                f"{p}: not a gpuplay result file; write one with gpuplay run/compare/sweep --format json"
            )
    for problem in problems:
        warnings.warn(visible(problem), stacklevel=2)
    return out
