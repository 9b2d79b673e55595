"""The playground's panels. Each renders state the app hands it; none holds measurement state."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from gpuplay.core.hw import nvidia as gpm
from gpuplay.core.measure.roofline import NOT_CALIBRATED, roof_text
from gpuplay.core.measure.stats import Summary
from gpuplay.core.reports.report import fmt_error, fmt_rate, fmt_speedup, fmt_time
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.safetext import visible
from gpuplay.core.studies.compare import Row
from gpuplay.core.workloads import reference_name
from gpuplay.tui.barchart import bar_lines
from gpuplay.tui.controls import CONTROLS, controls_for, label, values_for, verdict_for
from gpuplay.tui.keeptogether import NBSP, keep_together
from gpuplay.tui.rowlabels import distinct_labels
from gpuplay.tui.viewmodels import compare_cells, ellipsize, fit_columns

if TYPE_CHECKING:  # the telemetry (psutil) is imported after the first frame (tabs/telemetry.py)
    from gpuplay.core.measure.telemetry import Snapshot

PHASE_COLORS = {"compile": "red", "warmup": "orange", "timed": "green"}


TITLE_WIDTH = max(len(c.title) for c in CONTROLS)


class ControlsPanel(Static):
    """Every control with its values; unavailable values dimmed, with the reason below."""

    def show(
        self,
        spec: RunSpec,
        preset: str,
        step_limit: float,
        paused: bool,
        compact: bool = False,
        probes: tuple[bool, ...] = (),
    ) -> None:
        key = (spec, preset, step_limit, paused, compact, probes)
        if key == getattr(self, "_key", None):
            return  # nothing a user could see has changed
        self._key = key
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold cyan", no_wrap=True)
        # As wide as the longest title any scenario shows: SVD's "linalg library" widened the
        # column and moved every value when it appeared.
        t.add_column(no_wrap=True, min_width=TITLE_WIDTH)
        t.add_column()
        reasons: list[str] = []
        probing: list[str] = []  # backends whose probe has not answered yet: no verdict, no ✗
        for c in controls_for(spec):
            current = c.value(spec)
            cells = Text()
            for v in values_for(c.field):
                if v == current:
                    if cells:
                        cells.append(" ")
                    cells.append(f" {label(v)} ", style="reverse bold")
                    continue
                verdict = verdict_for(spec, c.field, v)
                if verdict is not None and verdict.pending:
                    if c.field == "backend":
                        probing.append(label(v))
                    if not compact:
                        cells.append(" " if cells else "")
                        cells.append(f"{label(v)}…", style="dim italic")
                    continue
                why = str(verdict) if verdict is not None else None
                if compact:  # only the current value; the reasons still listed below
                    if why and c.field in ("backend", "device"):
                        reasons.append(f"{label(v)}: {why.removeprefix(f'{label(v)}: ')}")
                    continue
                if cells:
                    cells.append(" ")
                if why:
                    cells.append(label(v), style="dim strike")
                    # the scenario's own parameters (a runtime, a loader's pin) always say why
                    if c.field in ("backend", "device") or c.lever.is_param or len(reasons) < 3:
                        name = label(v) if c.field in ("backend", "device") else f"{c.title} {label(v)}"
                        reasons.append(f"{name}: {why.removeprefix(f'{name}: ')}")  # no "CuPy: CuPy:"
                else:
                    cells.append(label(v))
            t.add_row(c.key, c.title, cells)
        t.add_row("p", "preset", Text(f" {preset} ", style="reverse bold"))
        t.add_row("l", "step limit", Text(f" {step_limit:g} s ", style="reverse bold"))
        if paused:
            t.add_row("␣", "", Text(" PAUSED ", style="bold black on yellow"))
        unique = list(dict.fromkeys(reasons))
        self.reasons = unique  # what the panel says is unavailable, and why
        self.probing = probing  # what it is still finding out
        lines = [f"✗ {r}" for r in unique[: 2 if compact else 5]]
        if probing:
            lines.insert(0, f"… checking {', '.join(probing)} (import and devices)")
        self.lines = lines  # the text below the controls, as shown
        notes = Text(
            "\n".join(lines),
            style="dim",
            overflow="ellipsis",
            no_wrap=compact,
        )
        # A reason cut to the panel's width is read whole in its tooltip and on the help screen (?).
        self.tooltip = Text("\n".join(f"✗ {r}" for r in self.reasons)) if self.reasons else None
        unique = unique or probing
        self.update(Group(t, notes) if unique else t)


class SpeedupDigits(Static):
    """The speedup over NumPy on the CPU, in big digits."""

    def show(
        self,
        speedup: float | None,
        note: str,
        marker: str = "",
        reason: str = "",
        short: str = "",
        versus: str = "NumPy on the CPU",
    ) -> None:
        from textual.renderables.digits import Digits

        self._args = (speedup, note, marker, reason, short, versus)
        self.speedup, self.note, self.marker = speedup, note, marker
        self.tooltip = reason or None
        width = self.content_size.width
        if not width:
            return  # hidden (a tab shown again is laid out after this): on_resize draws it at its width
        key = (speedup, note, marker, reason, short, versus, width)
        if key == getattr(self, "_key", None):
            return  # drawn already: a repaint (a tab shown again) does not lay it out anew
        self._key = key
        if speedup is None:
            self.update(Group(Text(note or "speedup vs NumPy CPU: —", style="dim")))
            return
        value = f"{speedup:.0f}x" if speedup >= 100 else f"{speedup:.3g}x"
        style = "bold yellow" if marker else "bold green" if speedup >= 1 else "bold red"
        lines: list[Any] = [
            Digits(value, style=style),
            keep_together(Text(f"vs {versus}  {note}", style="dim"), width),
        ]
        if marker:  # an unstable figure says so where it is read, and why
            lines.append(
                keep_together(
                    Text(
                        f"{marker} This speedup is uncertain: {short or reason}. The ⚠ speedup row says why.",
                        style="yellow",
                    ),
                    width,
                )
            )
        self.update(Group(*lines))

    def on_resize(self) -> None:
        if getattr(self, "_args", None) is not None:
            self.show(*self._args)


class _Rows:
    """A label/value grid's rows, collected before the value column's width is known."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, Any]] = []

    def add_row(self, name: str, value: Any) -> None:
        self.rows.append((name, value))

    def table(self, width: int) -> Table:
        """The grid, each value broken into lines between figures (keeptogether) to fit `width`."""
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold", no_wrap=True)
        t.add_column()
        label_w = max((len(n) for n, _ in self.rows), default=0)
        room = width - label_w - 1 if width > 0 else 0
        for name, value in self.rows:
            text = value if isinstance(value, Text) else Text.from_markup(value)
            t.add_row(name, keep_together(text, room))
        return t


class StatsPanel(Static):
    def on_resize(self) -> None:
        # Its values are broken into lines to the width: drawn again only if they now break elsewhere
        if getattr(self, "_args", None) is not None:
            self.show(*self._args)

    def show(self, spec: RunSpec | None, summary: Summary | None, phase: str, info: dict[str, Any]) -> None:
        self._args = (spec, summary, phase, info)
        if not self.content_size.width:
            return  # hidden (a tab shown again is laid out after this): on_resize draws it at its width
        t = _Rows()
        if spec is None:
            self._cells = None
            self.update(Text("choose a scenario", style="dim"))
            return
        words = [text for _, text in spec.label_parts()]  # "torch cpu float32" is never broken
        t.add_row("config", Text(visible(" ".join([NBSP.join(words[:3]), *words[3:]]), one_line=True)))
        t.add_row("phase", Text(phase, style="yellow" if phase not in ("done",) else "green"))
        if info.get("message"):  # why it failed or was refused: first, never below the fold
            t.add_row("status", Text(visible(info["message"]), style="bold red"))
        if summary is not None:
            spread = f"±{100 * summary.rel_iqr / 2:.1f}%" if math.isfinite(summary.rel_iqr) else ""
            t.add_row("median", f"{fmt_time(summary.median)} {spread}  (n={summary.n})")
            fresh = info.get("fresh_spread")
            if fresh:  # fresh processes disagree: the median is the middle one's
                t.add_row(
                    "",
                    f"{fmt_time(fresh['min_s'])}–{fmt_time(fresh['max_s'])} in {fresh['loops']} fresh processes",
                )
            other = info.get("other_mode")
            if other:  # the allocation mode a plain loop does not get, by name
                t.add_row("", f"{fmt_time(other['median_s'])} with {escape(str(other['name']))}")
            t.add_row("p10–p90", f"{fmt_time(summary.p10)} – {fmt_time(summary.p90)}")
            flops, nbytes = info.get("flops"), info.get("bytes")
            gflops = flops / summary.median / 1e9 if flops else None
            gbps = nbytes / summary.median / 1e9 if nbytes else None
            t.add_row("rate", f"{fmt_rate(gflops, 'FLOP/s')}  {fmt_rate(gbps, 'B/s')}")
        else:
            t.add_row("median", "—")
        if info.get("compile_s") is not None:
            t.add_row("compile", f"{fmt_time(info['compile_s'])} (excluded)")
        if info.get("build_s") is not None:  # an inference runtime's export/build (core/runtimes)
            runtime = (info.get("conditions") or {}).get("runtime", "runtime")
            t.add_row("build", Text(f"{visible(str(runtime))} {fmt_time(info['build_s'])} (excluded)"))
        if info.get("split"):  # a data loader's step: waiting for data vs copy vs model
            t.add_row("split", Text(info["split"].removeprefix("split: ")))
        if info.get("result") is not None:
            ref = reference_name(info["result"].spec.workload)  # inference: the float32 forward pass
            t.add_row("error", f"{fmt_error(info['result'])} vs {ref}")
        if info.get("speedup_reason"):  # beside the big digits' "~": why
            t.add_row("⚠ speedup", Text(info["speedup_reason"], style="yellow"))
        c = info.get("conditions") or {}
        if c:
            th = c.get("threads") or {}
            if spec.backend == "numpy":
                threads = f"BLAS {th.get('numpy_blas')} (ufuncs/FFT 1)"
            else:
                threads = f"{th.get('torch_intraop')}" if spec.backend == "torch" else "GPU"
            t.add_row("dtype", f"{c.get('dtype')} → computes in {c.get('compute_dtype')}")
            t.add_row("threads", f"{threads} of {th.get('cores')} cores · {c.get('timer', '')}")
            t.add_row("transfers", "timed" if c.get("transfers_timed") else "not timed (data on device)")
            t.add_row("device", escape(str(c.get("device_name", ""))))
        self._roof_and_noise(t, info)
        if info.get("energy"):
            t.add_row("energy", Text(info["energy"], style="dim"))
        if info.get("activity"):  # GPM: what the SMs, tensor cores and DRAM did in the timed steps
            t.add_row("GPU activity", Text(visible(info["activity"]), style="dim"))
        if info.get("activity_change"):
            t.add_row("", Text(visible(info["activity_change"]), style="bold"))
        if info.get("peak_memory"):
            t.add_row("peak mem", Text(info["peak_memory"], style="dim"))
        for note in info.get("notes", [])[:3]:
            t.add_row("note", Text(visible(note), style="dim"))
        table = t.table(self.content_size.width)
        cells = _cells(table)
        if cells == getattr(self, "_cells", None):
            return  # drawn already: a repaint (the tab shown again) does not lay it out anew
        self._cells = cells
        self.update(table)

    @staticmethod
    def _roof_and_noise(t: _Rows, info: dict[str, Any]) -> None:
        """Where the result sits under its roof, and what else used the machine, in words.

        From info["roof"] / info["noise"] when the app gives them (RunResult.roof_fields(),
        RunResult.noise_warnings), else from a finished info["result"].
        """
        r = info.get("result")
        roof = info.get("roof") or (r.roof_fields() if r is not None else None)
        noise = info.get("noise") if "noise" in info else (r.noise_warnings if r is not None else [])
        if roof:
            t.add_row("roof", roof_line(roof))
        for w in (noise or [])[:4]:
            t.add_row("⚠ noise" if not w.startswith("unstable") else "⚠ spread", Text(w, style="yellow"))


def _cells(table: Table) -> tuple[Any, ...]:
    """What a table of text shows, cell by cell with its styles: two tables with the same cells
    draw the same (a panel handed the same figures again is not redrawn)."""

    def cell(c: Any) -> Any:
        if isinstance(c, Text):
            return (c.plain, str(c.style), tuple(c.spans), c.overflow, c.no_wrap)
        return (type(c).__name__, str(c))

    return tuple(tuple(cell(c) for c in col.cells) for col in table.columns)


def roof_line(roof: dict[str, Any]) -> Text:
    """'19% of compute roof · 85 FLOP/B (ridge 8.7) · peak 185 GFLOP/s float32'."""
    if roof.get("status") == "stale":  # a result above its stored roof: that roof read low
        return Text(str(roof.get("note")), style="yellow")
    if roof.get("status") != "ok":
        return Text(str(roof.get("note") or roof.get("status") or NOT_CALIBRATED), style="dim")
    text = Text(roof_text(roof), style="bold")
    text.append(f" · {roof['intensity_flop_per_byte']:.3g} FLOP/B", style="")
    if roof.get("ridge_flop_per_byte"):
        text.append(f" (ridge {roof['ridge_flop_per_byte']:.3g})")
    if roof["bound"] == "compute" and roof.get("peak_gflops"):
        text.append(f" · peak {fmt_rate(roof['peak_gflops'], 'FLOP/s')} {roof.get('peak_dtype', '')}")
    else:
        text.append(f" · {roof['bandwidth_gbs']:.3g} GB/s memory")
    if roof.get("note"):
        text.append(f"\n{roof['note']}", style="yellow")
    return text


class Pacer:
    """At most one redraw per period for views fed by a periodic source (telemetry).

    Every redraw of a widget rewrites its whole region on the terminal: a chart of 160×30
    cells is ~20 KB of escape sequences. Idle, nothing a user watches changes faster than
    every few seconds, so a periodic tick must not redraw faster than that.
    """

    def __init__(self) -> None:
        self._drawn_at = -math.inf
        self._what: Any = None

    def due(self, what: Any, period: float) -> bool:
        """True when `what` (what is shown: device, view) changed or `period` s have passed."""
        now = time.monotonic()
        if what != self._what or now - self._drawn_at >= period:
            self._what, self._drawn_at = what, now
            return True
        return False


class CachedPlot(PlotextPlot):
    """A plot that rebuilds only when its data or size changed.

    PlotextPlot rebuilds the whole figure on every render (~20 ms at 160x45, ~100 ms on a loaded
    machine), and a layout change (a tab switch) re-renders every visible widget. A layout that
    goes and comes back (the help panel opened then closed) shows the same data at the sizes it
    had: the renders are kept per size (a few) until the data changes.
    """

    SIZES_KEPT = 4
    _version = 0
    _cache_version = -1
    _cache: dict[tuple[Any, ...], Any]

    def unchanged(self, key: Any) -> bool:
        """True when `key` (a summary of the data) is what is drawn already."""
        if key == getattr(self, "_data_key", object()):
            return True
        self._data_key = key
        return False

    def changed(self) -> None:
        self._version += 1
        self.refresh()

    def render(self) -> Any:
        if self._cache_version != self._version:  # new data: no render of the old one is shown again
            self._cache, self._cache_version = {}, self._version
        key = (self.size.width, self.size.height, self.app.theme)
        if key not in self._cache:
            if len(self._cache) >= self.SIZES_KEPT:
                del self._cache[next(iter(self._cache))]  # the oldest
            self._cache[key] = super().render()
        return self._cache[key]


class ClaimLine(Static):
    """The public claim this scenario checks, beside the live figures."""

    def show(self, scenario: Any) -> None:
        if scenario is getattr(self, "_scenario", object()):
            return  # drawn already (a scenario, as loaded, does not change)
        self._scenario = scenario
        if scenario is None or scenario.claim is None:
            self.update("")
            return
        c = scenario.claim
        text = Text()
        text.append("claim: ", style="bold")
        text.append(visible(c.text))
        if c.flaws:
            text.append(f"  ⚠ {visible(c.flaws[0])}", style="italic")
        self.update(text)


class StepChart(CachedPlot):
    """Per-step times: compile and warm-up in their own colours, then the timed steps."""

    def show(self, samples: Sequence[tuple[str, float]], median: float | None, title: str) -> None:
        if self.unchanged((len(samples), samples[-1] if samples else None, median, title)):
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        plt.xlabel("step")
        shown = list(samples)[-600:]
        # The first compile can take 10⁴× a step: it is drawn clipped at the top of the steps'
        # scale, with a ▲ marker and its time in the legend, so the steps stay readable.
        steps = [dt for ph, dt in shown if ph != "compile"]
        self.clipped: float | None = None  # the compile time drawn off scale, if any
        top = max(steps, default=max((dt for _, dt in shown), default=1.0))
        # plotext truncates long tick labels ("6.7e-03" shows as "6.7"): pick a unit that keeps them short.
        unit, scale = ("s", 1.0) if top >= 10 else ("ms", 1e3) if top >= 1e-3 else ("µs", 1e6)
        plt.ylabel(unit)
        offset = max(0, len(samples) - len(shown))
        for phase, color in PHASE_COLORS.items():
            xs = [offset + i for i, (ph, _) in enumerate(shown) if ph == phase]
            ys = [dt * scale for ph, dt in shown if ph == phase]
            if not xs:
                continue
            if phase == "compile" and steps and max(ys) > top * scale:
                slowest = self.clipped = max(dt for ph, dt in shown if ph == phase)
                clipped = [min(y, top * scale) for y in ys]
                label = f"compile {fmt_time(slowest)} (off scale)"
                plt.scatter(xs, clipped, marker="▲", color=color, label=label)
            else:
                plt.scatter(xs, ys, marker="dot", color=color, label=phase)
        if median is not None and shown:
            plt.hline(median * scale, "blue")
        self.changed()


class CompareView(Vertical):
    """Every configuration tried this session for the current workload and size."""

    def compose(self) -> ComposeResult:
        yield DataTable(id="compare-table", zebra_stripes=True, cursor_type="row")
        yield CompareChart(id="compare-chart")

    def show(self, rows: Sequence[Row], focus: tuple[str, str] | None) -> None:
        # The table's width is part of what is drawn: columns are chosen to fit it.
        width = max(0, self.size.width - 2)  # room for the vertical scrollbar
        key = (
            tuple((r.result.spec, r.result.median, r.speedup, r.speedup_marker) for r in rows),
            focus,
            width,
        )
        self._shown = (rows, focus)
        if key == getattr(self, "_key", None):
            return
        self._key = key
        table = self.query_one(DataTable)
        cells = [
            compare_cells(row, label)
            for row, label in zip(rows, distinct_labels([r.result.spec for r in rows]), strict=True)
        ]
        columns = fit_columns(cells, width)
        self.columns = [name for name, _ in columns]  # what is shown, for tests and screen readers
        table.clear(columns=True)
        for name, w in columns:
            table.add_column(name, width=w, key=name)
        for c in cells:
            table.add_row(*(ellipsize(c[name], w) for name, w in columns))
        chosen = [row for row in rows if focus and (row.result.spec.workload, row.result.size) == focus]
        self.query_one(CompareChart).show(chosen, focus, others=len(rows) - len(chosen))

    def on_resize(self) -> None:
        if getattr(self, "_shown", None) is not None:
            self.show(*self._shown)


def bars_that_fit(rows: Sequence[Row], room: int, speedups: bool) -> list[Row]:
    """The rows a bar chart of `room` lines can show, one line a bar, in their order: the
    baseline, then the fastest configurations."""
    if room <= 0 or len(rows) <= room:
        return list(rows)

    def speed(r: Row) -> float:
        return (r.speedup or 0.0) if speedups else -(r.result.median or 0.0)

    first = [r for r in rows if r.speedup == 1.0 or r.result.spec.backend == "numpy"][:1]
    rest = sorted((r for r in rows if r not in first), key=speed, reverse=True)[: max(0, room - len(first))]
    keep = {id(r) for r in first + rest}
    return [r for r in rows if id(r) in keep]


def how_timed(rows: Sequence[Row], short: bool = False) -> str:
    """Words for how the bars' speedups were measured: a paired speedup beside the table's medians
    is not their ratio (1024² matmul: 3.47× from pairs under medians of 16.7 and 4.61 ms, 3.62×).
    `short`: the words for a chart too narrow for the long ones in its title's rows."""
    paired = [r for r in rows if r.paired is not None and r.baseline is not r.result]
    apart = [r for r in rows if r.paired is None and r.baseline is not None and r.baseline is not r.result]
    if paired and not apart:
        return "; paired, not the medians' ratio" if short else (
            ", each timed in pairs with it: not the ratio of the medians")  # fmt: skip
    if paired:
        return "; paired, or the medians' ratio (~)" if short else (
            ", in pairs with it where it ran beside it, else the ratio of the medians (~)")  # fmt: skip
    if apart:
        return "; the medians' ratio" if short else ", the ratio of medians measured apart"
    return ""


class CompareChart(Static):
    """The focused scenario's configurations as bars: speedups over NumPy, or medians without
    them; every bar labelled with what tells it from the others (rowlabels)."""

    TITLE_ROWS = 2  # a title over 2 lines at 80 columns; one line of bars below at the least

    def show(self, rows: Sequence[Row], focus: tuple[str, str] | None = None, others: int = 0) -> None:
        self._shown = (rows, focus, others)
        key = (
            tuple((r.result.spec, r.result.median, r.speedup) for r in rows),
            self.size.width,
            self.size.height,
            focus,
            others,
        )
        if key == getattr(self, "_key", None):
            return
        self._key = key
        width = max(20, self.size.width or 80)
        rows = [r for r in rows if r.result.median]
        if not rows:
            # Named, and the rows in the table above accounted for: "no finished measurement of
            # this scenario yet" under five finished rows (of the scenario before) read as a lie.
            what = f"{focus[0]} {focus[1]}" if focus else "this scenario"
            more = f" · the {others} rows above are of others" if others else ""
            self.update(Text(visible(f"no finished {what} yet{more}", one_line=True), style="bold"))
            return
        speedups = all(r.speedup is not None for r in rows)
        what = visible(f"{rows[0].result.spec.workload}\u00a0{rows[0].result.size}", one_line=True)
        shown = rows
        for _ in range(3):  # the title's rows decide the bars' room, which may add "N more" to it
            title = self._title(speedups, rows, shown, what, width)
            room = (self.size.height or 8) - max(self.TITLE_ROWS, self._rows(title, width))
            fit = bars_that_fit(rows, room, speedups)
            if len(fit) == len(shown):
                break
            shown = fit
        title = self._title(speedups, rows, shown, what, width)
        labels = [visible(x, one_line=True) for x in distinct_labels([r.result.spec for r in shown])]
        if speedups:
            values = [r.speedup or 0.0 for r in shown]
            texts = [r.speedup_marker + fmt_speedup(v) for r, v in zip(shown, values, strict=True)]
        else:
            values = [(r.result.median or 0.0) * 1e3 for r in shown]
            texts = [fmt_time(r.result.median) for r in shown]
        lines = bar_lines(labels, values, texts, width)
        self.update(Group(Text(title, style="bold"), *lines))

    def _rows(self, title: str, width: int) -> int:
        return len(Text(title).wrap(self.app.console, width))

    def _title(self, speedups: bool, rows: Sequence[Row], shown: Sequence[Row], what: str, width: int) -> str:
        """The chart's title: its unit, which way is faster, how the speedups were timed (the
        shorter words where the longer take more than TITLE_ROWS rows) and the bars left out."""
        more = f" · {len(rows) - len(shown)}\u00a0more in the table" if len(shown) < len(rows) else ""
        if not speedups:
            return f"median time (ms, lower is faster) · {what}{more}"
        title = f"speedup over NumPy on the CPU (×, higher is faster){how_timed(shown)} · {what}{more}"
        if self._rows(title, width) > self.TITLE_ROWS:
            title = (
                f"speedup (×, higher is faster) over NumPy CPU{how_timed(shown, short=True)} · {what}{more}"
            )
        return title

    def on_resize(self) -> None:
        if getattr(self, "_shown", None) is not None:
            self.show(*self._shown)


class CodeView(Horizontal):
    """The workload's real source: NumPy beside the chosen backend."""

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="code-left")
        with VerticalScroll():
            yield Static(id="code-right")

    def show(self, left_title: str, left: str, right_title: str, right: str) -> None:
        self.query_one("#code-right", Static).code_text = right  # type: ignore[attr-defined]
        self.query_one("#code-left", Static).update(_code(left_title, left))
        self.query_one("#code-right", Static).update(_code(right_title, right))


def _code(title: str, source: str) -> Group:
    from rich.syntax import Syntax  # pygments: the Code tab's, not the first frame's

    return Group(
        Text(title, style="bold"),
        Syntax(source, "python", theme="ansi_dark", line_numbers=False, word_wrap=True),
    )


class TelemetryPanel(Static):
    """Host always; every GPU NVML sees, the run's GPU first; or the one line saying why not."""

    @property
    def pacer(self) -> Pacer:
        if "_pacer" not in self.__dict__:
            self._pacer = Pacer()
        return self._pacer

    def show(self, snap: Snapshot | None, nvml_line: str, device: str, period: float = 0.0) -> None:
        """`period`: redraw new samples at most this often (seconds); a new device at once."""
        if not self.pacer.due((device, nvml_line, snap is None), period):
            return
        if snap is None:
            self.update(Text("telemetry: waiting for the first sample…", style="dim"))
            return
        h = snap.host
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold", no_wrap=True)
        t.add_column()
        cores = " ".join(f"{p:3.0f}%" for p in h.cpu_percent[:16])
        t.add_row("CPU", f"{h.cpu_mean:5.1f}%  [{cores}]")
        t.add_row(
            "memory",
            f"{h.mem_used / 2**30:.1f} / {h.mem_total / 2**30:.1f} GiB · "
            f"gpuplay RSS {h.process_rss / 2**20:.0f} MiB"
            + (f" · engine {h.engine_rss / 2**20:.0f} MiB" if h.engine_rss else ""),
        )
        if nvml_line:
            t.add_row("GPU", Text(visible(nvml_line), style="dim"))
            # GPM (SM, tensor-core, DRAM activity) reads through NVML too: say so, not just nothing.
            t.add_row("GPM", Text("n/a: GPM counters are read through NVML (see GPU)", style="dim"))
        run_index = int(device.split(":")[1]) if device.startswith("cuda:") else None
        for g in sorted(snap.gpus, key=lambda g: g.index != run_index):
            mark = "▶ " if g.index == run_index and g.vendor == "NVIDIA" else ""
            vendor = "" if g.vendor == "NVIDIA" else f"{g.vendor} "  # amdsmi's numbering, not NVML's
            t.add_row(f"{mark}{vendor}GPU {g.index}", escape(g.name or "n/a"))
            t.add_row("  util", f"{_na(g.util_gpu, '%')} SM · {_na(g.util_mem, '%')} memory")
            mem = (
                f"{g.mem_used / 2**30:.1f} / {g.mem_total / 2**30:.1f} GiB"
                if g.mem_used is not None and g.mem_total
                else "n/a"
            )
            proc = f" (this process {g.process_mem / 2**30:.2f} GiB)" if g.process_mem else ""
            t.add_row("  memory", mem + proc)
            t.add_row(
                "  power",
                f"{_na(g.power_w, ' W', 0)} of {_na(g.power_limit_w, ' W', 0)} · "
                f"{_na(g.temp_c, ' °C')} · {g.pstate or 'n/a'}",
            )
            t.add_row(
                "  clocks",
                f"SM {_na(g.sm_clock_mhz, '')}/{_na(g.sm_clock_max_mhz, ' MHz')} · "
                f"mem {_na(g.mem_clock_mhz, '')}/{_na(g.mem_clock_max_mhz, ' MHz')}",
            )
            t.add_row(
                "  PCIe",
                f"gen {_na(g.pcie_gen, '')} x{_na(g.pcie_width, '')} · "
                f"TX {_na(g.pcie_tx_mbs, ' MB/s')} RX {_na(g.pcie_rx_mbs, ' MB/s')}",
            )
            for row, text in gpm_rows(g.activity):
                t.add_row(row, Text(visible(text), style="dim" if row == "  GPM" else ""))
        self.update(t)


def gpm_rows(activity: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The Telemetry panel's GPM rows of one GPU: its figures, or one row saying why there are none."""
    if activity is None:
        return []
    if activity.get("reason"):
        return [("  GPM", str(activity["reason"]))]
    occupancy = gpm.bounded("sm_occupancy", activity.get("sm_occupancy"))
    return [
        (
            "  activity",
            gpm.summary(activity) + (f" · occupancy {occupancy:.0f} %" if occupancy is not None else ""),
        ),
        ("  tensor pipes", gpm.pipes(activity) or "n/a"),
        ("  links", gpm.links(activity)),
    ]


class TelemetryChart(CachedPlot):
    @property
    def pacer(self) -> Pacer:
        if "_pacer" not in self.__dict__:
            self._pacer = Pacer()
        return self._pacer

    def on_resize(self) -> None:
        # The y axis' headroom for the legend is counted in rows: a new height draws it again.
        if getattr(self, "_shown", None) is not None:
            self._data_key = None
            self.show(*self._shown)

    def show(self, history: Sequence[Snapshot], device: str, period: float = 0.0) -> None:
        """`period`: redraw new samples at most this often (seconds); a new device at once."""
        self._shown = (history, device, 0.0)
        key = (len(history), history[-1].t if history else None, device, self.size.height)
        if key == getattr(self, "_data_key", object()) or not self.pacer.due((device, bool(history)), period):
            return
        self.unchanged(key)
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if not history:
            self.changed()
            return
        t0 = history[-1].t
        xs = [s.t - t0 for s in history]
        plt.plot(xs, [s.host.cpu_mean for s in history], label="CPU %", color="cyan")
        plt.plot(
            xs,
            [100 * s.host.mem_used / s.host.mem_total if s.host.mem_total else 0 for s in history],
            label="host mem %",
            color="magenta",
        )
        index = int(device.split(":")[1]) if device.startswith("cuda:") else 0
        gpu = [next((g for g in s.gpus if g.index == index and g.vendor == "NVIDIA"), None) for s in history]
        if any(g is not None and g.util_gpu is not None for g in gpu):
            plt.plot(
                xs,
                [g.util_gpu if g and g.util_gpu is not None else 0 for g in gpu],
                label="GPU %",
                color="green",
            )
        if any(g is not None and g.mem_total for g in gpu):
            plt.plot(
                xs,
                [
                    100 * g.mem_used / g.mem_total if g and g.mem_used is not None and g.mem_total else 0
                    for g in gpu
                ],
                label="GPU mem %",
                color="yellow",
            )
        if any(g is not None and g.power_limit_w for g in gpu):
            plt.plot(
                xs,
                [
                    100 * g.power_w / g.power_limit_w if g and g.power_w and g.power_limit_w else 0
                    for g in gpu
                ],
                label="power % of limit",
                color="red",
            )
        # plotext writes the legend, a line per series, over the canvas's top rows: the y axis
        # reaches above 100 % by as many rows, so the lines run under the legend, never behind it.
        series = (
            2
            + sum(
                any(g is not None and getattr(g, attr) for g in gpu)
                for attr in ("util_gpu", "mem_total", "power_limit_w")
            )
            + _gpm_series(plt, xs, gpu)
        )
        canvas = max(3, (self.size.height or 20) - 4)  # less title, frame and ticks
        # 100 % one row below the legend's last line (plotext's rows are not exactly linear)
        top = 100 * (canvas - 1) / (canvas - series - 2) if series + 2 < canvas else 100
        plt.ylim(0, top)
        plt.yticks([0, 25, 50, 75, 100])
        span = -xs[0]
        ticks = [-span * k / 4 for k in range(4, -1, -1)] if span > 0 else [0.0]
        plt.xticks(ticks, [f"{-t:.0f} s ago" if t < 0 else "now" for t in ticks])
        plt.title("use in %, over the last minutes")
        self.changed()


def _gpm_series(plt: Any, xs: list[float], gpu: list[Any]) -> int:
    """GPM's tensor-core and DRAM activity beside NVML's utilisation, where GPM gives them; how
    many series it drew."""
    drawn = 0
    for key, name, color in (
        ("tensor_active", "tensor cores %", "blue"),
        ("dram_active", "DRAM bw %", "white"),
    ):
        vals = [gpm.bounded(key, (g.activity or {}).get(key)) if g is not None else None for g in gpu]
        if any(v is not None for v in vals):
            plt.plot(xs, [v if v is not None else 0 for v in vals], label=name, color=color)
            drawn += 1
    return drawn


def _na(v: Any, unit: str, digits: int = 0) -> str:
    if v is None:
        return "n/a"
    return f"{v:.{digits}f}{unit}" if isinstance(v, float) else f"{v}{unit}"


class HelpScreen(ModalScreen[None]):
    """Every key, generated from the app's bindings so it cannot drift from them.

    A page of its own, opaque: a modal's translucent background makes Textual render the whole
    main screen again under it and blend it, on every paint of the help (`?` and Escape were the
    slowest keys). The keys' panel sits centred on the app's own background."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; background: $background; }
    HelpScreen:ansi { background: ansi_default; }
    HelpScreen > VerticalScroll { width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; border-title-color: $accent; border-subtitle-color: $text-muted;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, bindings: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        t = Table(title="gpuplay keys", box=None, header_style="bold", expand=True)
        t.add_column("key", style="bold cyan", no_wrap=True)
        t.add_column("action")
        for key, desc in self.rows:
            t.add_row(key, desc)
        with VerticalScroll() as panel:
            panel.border_title = "help"
            panel.border_subtitle = "Esc · ? · q close"
            yield Static(t)
            yield Static(id="help-unavailable")
            yield Static(
                Text(
                    "Esc closes this help. Every number is a median of timed steps after warm-up, "
                    "checked against a float64 NumPy reference.",
                    style="dim",
                )
            )

    def on_screen_resume(self) -> None:
        """What is unavailable here and why, in full (the controls panel cuts it to its width)."""
        reasons: list[str] = getattr(self.app, "unavailable_reasons", list)()
        text = Text()
        if reasons:
            text.append("\nunavailable here, and why\n", style="bold")
            text.append("\n".join(f"✗ {visible(r)}" for r in reasons))
            text.append("\n")
        self.query_one("#help-unavailable", Static).update(text)
