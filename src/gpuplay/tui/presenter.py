"""The presenter view of a demo deck: one step at a time, measured live or replayed from a recording.

→ or space: next step; ←: previous. Live, each step's configuration runs in a thread worker
(through `measure`, the one function that measures) and posts messages back; the speedup over
NumPy on the CPU shows in big digits, the deck's steps so far as a staircase of medians.
A step that cannot run here falls back to a recorded figure when the deck or a recording has
one, and says so. Every widget is mounted once; steps only update their content (no flicker).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import Digits, Footer, Static

from gpuplay.core.compare import baseline_spec, is_baseline
from gpuplay.core.decks import Deck, DeckStep, Recording, speedup_of
from gpuplay.core.report import fmt_error, fmt_speedup, fmt_time, threads_text
from gpuplay.core.result import RunResult
from gpuplay.core.safetext import visible
from gpuplay.core.sessionlog import SessionLog
from gpuplay.core.spec import RunSpec
from gpuplay.core.stats import summarize
from gpuplay.tui.themes import apply_theme

PROGRESS_INTERVAL_S = 0.2  # a live median at most five times a second: calm on a projector


def measure(
    spec: RunSpec,
    on_sample: Any = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: Any = None,
    telemetry: Any = None,
) -> RunResult:
    """The presenter's only way to measure: in the engine process, as the playground does."""
    from gpuplay.core.engine import measure as in_engine

    return in_engine(spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry)


def live_spec(spec: RunSpec) -> RunSpec:
    """The app's live thread policy (cores − 1) where the deck leaves threads to the libraries.

    On a busy 2-core machine two OpenMP threads and the UI oversubscribe the cores, and a
    µs-scale step can stall for milliseconds at every parallel region.
    """
    if spec.threads is not None:
        return spec
    from gpuplay.core.system import cpu_count
    from gpuplay.tui.controls import live_threads

    return spec.replace(threads=live_threads(cpu_count()))


# -- messages from the worker ------------------------------------------------------------
class StepProgress(Message):
    def __init__(self, run_id: int, samples: list[float]) -> None:
        super().__init__()
        self.run_id, self.samples = run_id, samples


class StepPhase(Message):
    def __init__(self, run_id: int, phase: str) -> None:
        super().__init__()
        self.run_id, self.phase = run_id, phase


class SpecMeasured(Message):
    """`result` of the deck's spec `key` (measured with the live thread policy applied)."""

    def __init__(self, run_id: int, key: RunSpec, result: RunResult) -> None:
        super().__init__()
        self.run_id, self.key, self.result = run_id, key, result


# -- what a step shows -------------------------------------------------------------------
@dataclass
class Figure:
    """A step's figure and where it came from: measured here, recorded, or a fallback."""

    median: float | None
    speedup: float | None
    source: str  # live | recorded | fallback | unavailable | measuring
    detail: str = ""  # conditions, or why the step did not run
    result: RunResult | None = None


def figure_for(
    step: DeckStep,
    result: RunResult | None,
    baseline: RunResult | None,
    *,
    source: str,
    fallback: Recording | None = None,
    where: str = "here",
) -> Figure:
    """What to show for `step` given its result (live or recorded), with the fallbacks in order."""
    if result is not None and result.usable and result.status == "ok":
        s = result.summary
        detail = f"{result.spec.label()} · {result.size} · ±{100 * s.rel_iqr / 2:.1f}% · n={s.n}" if s else ""
        if result.error is not None:
            detail += f" · error {fmt_error(result)} vs float64"
        if result.conditions.get("threads"):
            detail += f" · threads: {threads_text(result.conditions)}"
        return Figure(result.median, speedup_of(result, baseline), source, detail, result)
    why = f"{result.status} {where}: {result.message}" if result is not None else f"not measured {where}"
    recorded = fallback.get(step.spec) if fallback is not None else None
    if recorded is not None and recorded.usable and recorded.status == "ok":
        base = fallback.get(baseline_spec(step.spec)) if fallback is not None else None
        return Figure(
            recorded.median,
            speedup_of(recorded, base),
            "fallback",
            f"{why} · showing the figure {fallback.label if fallback else ''}",
            recorded,
        )
    if step.recorded is not None:
        rec = step.recorded
        return Figure(
            rec.median_s,
            rec.speedup,
            "fallback",
            f"{why} · showing the recorded figure: {rec.device}, {rec.source}",
        )
    return Figure(None, None, "unavailable", f"{why} · no recorded figure for this step")


class Staircase(Widget):
    """The current section's steps so far, each median as a bar; redrawn to its width on resize."""

    DEFAULT_CSS = "Staircase { height: auto; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[tuple[str, Figure | None, bool]] = []

    def show(self, rows: list[tuple[str, Figure | None, bool]]) -> None:
        self.rows = rows
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return max(1, len(self.rows) + 1)

    def render(self) -> Any:
        medians = [f.median for _, f, _ in self.rows if f is not None and f.median]
        top = max(medians, default=0.0)
        titles = _short_titles([title for title, _, _ in self.rows])
        label_width = min(26, max([15, *(len(x) for x in titles)]))
        bar_width = max(4, self.content_size.width - label_width - 9 - 8 - 3)
        t = Table.grid(padding=(0, 1))
        t.add_column(no_wrap=True, width=label_width)
        t.add_column(no_wrap=True, width=bar_width)
        t.add_column(no_wrap=True, justify="right", width=9)
        t.add_column(no_wrap=True, justify="right", width=8)
        t.add_row(Text("median per step", style="bold"), "", "", "")
        for title, (_, fig, current) in zip(titles, self.rows):
            style = "bold reverse" if current else ""
            label = Text(title, style=style, overflow="ellipsis")
            if fig is None or fig.median is None:
                what = "measuring…" if fig is not None and fig.source == "measuring" else "—"
                t.add_row(label, Text(what, style="italic"), "", "")
                continue
            cells = max(1, round(bar_width * fig.median / top)) if top else 1
            glyph = "░" if fig.source == "fallback" else "█"
            colour = "$warning" if fig.source == "fallback" else ("$accent" if current else "$primary")
            bar = Text(glyph * cells, style=_theme_colour(self, colour))
            mark = "*" if fig.source == "fallback" else ""
            t.add_row(label, bar, fmt_time(fig.median) + mark, fmt_speedup(fig.speedup))
        return t


def _short_titles(titles: list[str]) -> list[str]:
    """Titles without the section's shared prefix ("2D FFT · NumPy" → "NumPy")."""
    if len(titles) < 2:
        return [t.split(" · ", 1)[-1] for t in titles]
    parts = [t.split(" · ") for t in titles]
    common = 0
    while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    return [" · ".join(p[common:]) for p in parts]


def _theme_colour(widget: Widget, variable: str) -> str:
    """A theme variable ($primary) as a Rich colour, so bars follow the theme."""
    return str(widget.app.theme_variables.get(variable.lstrip("$"), "white"))


class PresenterApp(App[None]):
    CSS_PATH = Path(__file__).parent / "presenter.tcss"
    TITLE = "gpuplay demo"

    BINDINGS = [
        Binding("right,space,pagedown", "step(1)", "next", key_display="→"),
        Binding("left,pageup", "step(-1)", "previous", key_display="←"),
        Binding("home", "first", "first", show=False),
        Binding("r", "rerun", "re-run"),
        Binding("n", "toggle_notes", "notes"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Outside text (a deck's, a result's): shown as text, control characters visible."""
        super().notify(
            visible(message),
            title=visible(title, one_line=True),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def __init__(
        self,
        deck: Deck,
        *,
        replay: Recording | None = None,
        fallback: Recording | None = None,
        theme: str | None = None,
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.deck = deck
        self.replay = replay
        self.fallback = fallback or replay
        self.autostart = autostart
        apply_theme(self, theme)
        self.index = 0
        self.measured: dict[RunSpec, RunResult] = {}  # this session's live results
        self.failed: dict[RunSpec, RunResult] = {}
        self.run_id = 0
        self.cancel = threading.Event()
        self.measure_lock = threading.Lock()  # one measurement at any time
        self.running: RunSpec | None = None
        self.phase = ""
        self.samples: list[float] = []
        self.session_log = SessionLog()  # like every command: no finished measurement is lost

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="deck-bar")
        yield Static(id="step-title")
        with Horizontal(id="middle"):
            with Vertical(id="figure"):
                yield Digits("", id="speedup")
                yield Static(id="speedup-note")
                yield Static(id="detail")
            yield Staircase(id="staircase")
        yield Static(id="caption")
        yield Static(id="notes")
        yield Footer()

    def on_mount(self) -> None:
        self.show_step()

    def on_unmount(self) -> None:
        self.cancel.set()
        from gpuplay.core.engine import shutdown_shared

        shutdown_shared()  # a step mid-compile must not hold the projector hostage

    # -- navigation ---------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        new = min(max(self.index + delta, 0), len(self.deck.steps) - 1)
        if new != self.index:
            self.index = new
            self.show_step()

    def action_first(self) -> None:
        self.index = 0
        self.show_step()

    def action_rerun(self) -> None:
        if self.replay is not None:
            self.notify("replaying a recording: nothing is measured", severity="warning")
            return
        spec = self.step.spec
        self.measured.pop(spec, None)
        self.failed.pop(spec, None)
        self.show_step()

    def action_toggle_notes(self) -> None:
        self.query_one("#notes").toggle_class("hidden")

    @property
    def step(self) -> DeckStep:
        return self.deck.steps[self.index]

    # -- figures --------------------------------------------------------------------------
    def result_for(self, spec: RunSpec) -> RunResult | None:
        if self.replay is not None:
            return self.replay.get(spec)
        return self.measured.get(spec) or self.failed.get(spec)

    def figure(self, i: int) -> Figure | None:
        step = self.deck.steps[i]
        if self.replay is None and step.spec == self.running:
            median = summarize(self.samples).median if self.samples else None  # type: ignore[union-attr]
            base = self.measured.get(baseline_spec(step.spec))
            speedup = base.median / median if base is not None and base.median and median else None
            if is_baseline(step.spec) and median:
                speedup = 1.0
            return Figure(median, speedup, "measuring", f"{self.phase}…")
        result = self.result_for(step.spec)
        if result is None and self.replay is None:
            return None
        baseline = self.result_for(baseline_spec(step.spec))
        where = f"on {self.replay.device}" if self.replay is not None else "here"
        fallback = None if self.replay is not None else self.fallback
        fig = figure_for(
            step,
            result,
            baseline,
            source="recorded" if self.replay else "live",
            fallback=fallback,
            where=where,
        )
        if fig.source in ("live", "recorded") and baseline is None and not is_baseline(step.spec):
            fig.detail += " · NumPy baseline " + ("measuring…" if self.running else "not recorded")
        return fig

    # -- drawing ----------------------------------------------------------------------------
    def show_step(self) -> None:
        step = self.step
        n = len(self.deck.steps)
        if self.replay is not None:
            mode = Text(f" {self.replay.label} ", style="bold reverse")
        else:
            from gpuplay.core.system import cpu_count, cpu_name

            mode = Text(f" live on {cpu_name()} ({cpu_count()} cores) ", style="bold reverse")
        bar = Table.grid(expand=True)
        bar.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        bar.add_column(no_wrap=True)
        bar.add_column(no_wrap=True, justify="right")
        bar.add_row(Text(self.deck.title, style="bold"), f"step {self.index + 1} of {n}   ", mode)
        self.query_one("#deck-bar", Static).update(bar)
        self.query_one("#step-title", Static).update(Text(step.title, style="bold"))
        self.query_one("#caption", Static).update(step.caption)
        self.query_one("#notes", Static).update(Text(step.notes or "", style="italic"))
        if self.replay is None and self.autostart:
            if self.result_for(step.spec) is None:
                self.start_measurement([step.spec, baseline_spec(step.spec)])
            elif baseline_spec(step.spec) not in self.measured and not is_baseline(step.spec):
                self.start_measurement([baseline_spec(step.spec)])
        self.refresh_figures()

    def refresh_figures(self) -> None:
        fig = self.figure(self.index)
        digits = self.query_one("#speedup", Digits)
        note = self.query_one("#speedup-note", Static)
        if fig is not None and fig.speedup is not None:
            digits.update(f"{fig.speedup:,.0f}x" if fig.speedup >= 100 else f"{fig.speedup:.3g}x")
        else:
            digits.update("-")
        digits.set_class(fig is not None and fig.speedup is not None and fig.speedup < 1, "slower")
        digits.set_class(fig is None or fig.source in ("measuring", "unavailable"), "pending")
        digits.set_class(fig is not None and fig.source == "fallback", "fallback")
        label = "vs NumPy on the CPU"
        if fig is not None and fig.median is not None:
            label += f" · median {fmt_time(fig.median)}"
        if fig is not None and fig.source == "fallback":
            label = "RECORDED FIGURE, not measured here · " + label
        elif fig is not None and fig.source == "recorded" and self.replay is not None:
            label = f"{self.replay.label} · " + label
        note.update(Text(label, style="bold"))
        detail = self.query_one("#detail", Static)
        detail.update(Text(fig.detail if fig is not None else "queued…", style="italic"))
        detail.set_class(fig is not None and fig.source in ("fallback", "unavailable"), "warn")
        section = self.step.section
        rows = [
            (s.title, self.figure(i), i == self.index)
            for i, s in enumerate(self.deck.steps[: self.index + 1])
            if s.section == section
        ]
        self.query_one(Staircase).show(rows)

    # -- measuring ---------------------------------------------------------------------------
    def start_measurement(self, specs: list[RunSpec]) -> None:
        self.cancel.set()
        self.cancel = threading.Event()
        self.run_id += 1
        self.samples = []
        self.phase = "queued"
        todo = [s for s in dict.fromkeys(specs) if s not in self.measured]
        self.running = todo[0] if todo else None
        self._measure(todo, self.run_id, self.cancel)

    @work(thread=True, exclusive=True, group="measure", exit_on_error=False)
    def _measure(self, specs: list[RunSpec], run_id: int, cancel: threading.Event) -> None:
        with self.measure_lock:
            for k, spec in enumerate(specs):
                if cancel.is_set():
                    return
                pending: list[float] = []
                last = [time.monotonic()]

                def on_sample(
                    phase: str, dt: float, pending: list[float] = pending, last: list[float] = last
                ) -> None:
                    if phase != "timed":
                        return
                    pending.append(dt)
                    now = time.monotonic()
                    if now - last[0] >= PROGRESS_INTERVAL_S:
                        batch = pending[:]
                        pending.clear()
                        last[0] = now
                        self.post_message(StepProgress(run_id, batch))

                result = measure(
                    live_spec(spec),
                    on_sample if k == 0 else None,
                    cancel,
                    on_phase=(lambda ph, _d: self.post_message(StepPhase(run_id, ph))) if k == 0 else None,
                )
                self.post_message(SpecMeasured(run_id, spec, result))
                if k == 0 and result.status != "ok":
                    return  # no speedup to compute for a step that did not run

    def on_step_progress(self, msg: StepProgress) -> None:
        if msg.run_id == self.run_id:
            self.samples.extend(msg.samples)
            self.refresh_figures()

    def on_step_phase(self, msg: StepPhase) -> None:
        if msg.run_id == self.run_id:
            self.phase = msg.phase
            self.refresh_figures()

    def on_spec_measured(self, msg: SpecMeasured) -> None:
        r, key = msg.result, msg.key
        if r.status == "ok" and r.usable:
            self.measured[key] = r
            if not self.session_log.append(r):
                self.notify(self.session_log.error or "session log not written", severity="warning")
        elif r.status in ("failed", "refused"):
            self.failed[key] = r
        if msg.run_id == self.run_id and key == self.running:
            self.running = None
            self.samples = []
        if r.status in ("failed", "refused") and key == self.step.spec:
            fig = self.figure(self.index)
            fell_back = fig is not None and fig.source == "fallback"
            self.notify(
                f"{r.spec.label()}: {r.message}"
                + ("\nshowing the recorded figure instead" if fell_back else ""),
                title=f"step {r.status} here",
                severity="warning",
                timeout=6,
            )
        self.refresh_figures()
