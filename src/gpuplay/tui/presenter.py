"""The presenter view of a demo deck: one step at a time, measured live or replayed from a recording.

Keys are a clicker's: → space PageDown next, ← PageUp previous, Home/End, `g` N Enter a step,
`b`/`.` a black screen, `f` the big number alone, `t` a timer, `q` asks once. Live, each step's
configuration runs in a thread worker (through `measure`, the one function that measures) and
posts messages back; the speedup over NumPy on the CPU shows in block digits scaled to the
space (`BigNumber`), the section's steps so far as a staircase whose every bar says live or
recorded, which statistic, where and when. A step that cannot run here falls back to a recorded
figure when the deck or a recording has one, and says so. Every widget is mounted once and the
chart's height is fixed for the deck; steps only update content (no flicker, no jumping).
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
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Footer, Static

from gpuplay.core.measure.stats import summarize
from gpuplay.core.reports.decks import Deck, DeckStep, Recording, speedup_of
from gpuplay.core.reports.report import fmt_error, fmt_speedup, fmt_time, threads_text
from gpuplay.core.reports.sessionlog import SessionLog
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.safetext import visible
from gpuplay.core.studies.compare import baseline_spec, is_baseline
from gpuplay.core.workloads import reference_name
from gpuplay.tui.bignumber import BigNumber
from gpuplay.tui.keeptogether import at_most, keep_together
from gpuplay.tui.sweep_view import SWEEP_NOT_REPLAYED, SweepView, show_sweep_step
from gpuplay.tui.textapp import TextNotifications
from gpuplay.tui.themes import apply_theme

DETAIL_LINES = 5  # the step's conditions or why it did not run (presenter.tcss #detail's max-height)
PROGRESS_INTERVAL_S = 0.2  # a live median at most five times a second: calm on a projector


def measure(
    spec: RunSpec,
    on_sample: Any = None,
    cancel: threading.Event | None = None,
    *,
    pause: threading.Event | None = None,
    on_phase: Any = None,
    telemetry: Any = None,
    paired_with: RunSpec | None = None,
) -> RunResult:
    """The presenter's only way to measure: in the engine process, as the playground does;
    with `paired_with` (the step's NumPy baseline) timed in interleaved pairs."""
    from gpuplay.core.engine import measure as in_engine

    return in_engine(
        spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry, paired_with=paired_with
    )


def live_spec(spec: RunSpec) -> RunSpec:
    """The app's live thread policy (cores − 1) where the deck leaves threads to the libraries.

    On a busy 2-core machine two OpenMP threads and the UI oversubscribe the cores, and a
    µs-scale step can stall for milliseconds at every parallel region.
    """
    if spec.threads is not None:
        return spec
    from gpuplay.core.hw.system import cpu_count
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
    """A step's figure and where it came from: measured here, recorded, or a fallback.

    Every figure carries its provenance (live or recorded, where, when, which statistic) so a
    bar measured here never stands unlabelled beside one measured elsewhere.
    """

    median: float | None  # the figure in seconds, whatever `statistic` it is
    speedup: float | None
    source: str  # live | recorded | fallback | unavailable | measuring
    detail: str = ""  # conditions, or why the step did not run
    result: RunResult | None = None
    where: str = ""  # "here (cpu)", a recording's machine, a post's GPU
    when: str = ""  # a local time for live figures, a date for recorded ones
    statistic: str = "median"

    @property
    def origin(self) -> str:
        return "live" if self.source in ("live", "measuring") else "recorded"

    @property
    def tag(self) -> str:
        """One line: live/recorded · statistic · where · when."""
        parts = [self.origin, self.statistic, self.where, self.when]
        return " · ".join(p for p in parts if p)


def local_time(stamp: str) -> str:
    """A result's ISO timestamp as local HH:MM (the talk's clock), or '' when there is none."""
    import datetime as _dt

    try:
        return _dt.datetime.fromisoformat(stamp).astimezone().strftime("%H:%M")
    except (TypeError, ValueError):
        return ""


def _statistic(result: RunResult) -> str:
    n = result.summary.n if result.summary is not None else len(result.samples)
    return f"median of {n}"


def figure_for(
    step: DeckStep,
    result: RunResult | None,
    baseline: RunResult | None,
    *,
    source: str,
    fallback: Recording | None = None,
    where: str = "here",
    recording: Recording | None = None,
) -> Figure:
    """What to show for `step` given its result (live or recorded), with the fallbacks in order."""
    if result is not None and result.usable and result.status == "ok":
        s = result.summary
        detail = f"{result.spec.label()} · {result.size} · ±{100 * s.rel_iqr / 2:.1f}% · n={s.n}" if s else ""
        if result.error is not None:
            detail += f" · error {fmt_error(result)} vs {reference_name(result.spec.workload)}"
        if result.conditions.get("threads"):
            detail += f" · threads: {threads_text(result.conditions)}"
        if recording is not None:
            place, when = recording.device, recording.date
        else:
            place, when = f"here ({result.spec.device})", local_time(result.finished)
        return Figure(
            result.median,
            speedup_of(result, baseline),
            source,
            detail,
            result,
            place,
            when,
            _statistic(result),
        )
    why = f"{result.status} {where}: {result.message}" if result is not None else f"not measured {where}"
    recorded = fallback.get(step.spec) if fallback is not None else None
    if fallback is not None and recorded is not None and recorded.usable and recorded.status == "ok":
        base = fallback.get(baseline_spec(step.spec))
        return Figure(
            recorded.median,
            speedup_of(recorded, base),
            "fallback",
            f"{why} · showing the figure {fallback.label}",
            recorded,
            fallback.device,
            fallback.date,
            _statistic(recorded),
        )
    if step.recorded is not None:
        rec = step.recorded
        at = f" at {rec.size}" if rec.size and rec.size != step.size_label else ""
        return Figure(
            rec.median_s,
            rec.speedup,
            "fallback",
            f"{why} · showing the recorded figure{at}: {rec.device}, {rec.source}",
            where=rec.device,
            when=rec.date or rec.source,
            statistic=rec.statistic + at,  # another size than the live bars: said first
        )
    return Figure(None, None, "unavailable", f"{why} · no recorded figure for this step")


class Staircase(Widget):
    """The current section's steps so far, each figure as a bar over its provenance line.

    Its height is fixed by the deck's longest section (`fit`), so the chart never jumps as a
    talk moves on; it redraws to its width on resize.
    """

    DEFAULT_CSS = "Staircase { height: auto; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.rows: list[tuple[str, Figure | None, bool]] = []
        self.max_rows = 1

    def fit(self, max_rows: int) -> None:
        self.max_rows = max(1, max_rows)
        self.styles.height = 1 + 2 * self.max_rows

    def show(self, rows: list[tuple[str, Figure | None, bool]]) -> None:
        self.rows = rows
        self.refresh()

    def render(self) -> Any:
        width = max(24, self.content_size.width)
        medians = [f.median for _, f, _ in self.rows if f is not None and f.median]
        top = max(medians, default=0.0)
        titles = _short_titles([visible(title, one_line=True) for title, _, _ in self.rows])
        # A label is cut only when the bars would get fewer than MIN_BAR cells ("PyTorch on the
        # C…" at 100 columns, with room to spare).
        label_width = min(26, max([12, *(len(x) for x in titles)]), max(12, width - 9 - 8 - 3 - MIN_BAR))
        bar_width = max(4, width - label_width - 9 - 8 - 3)
        out = Text(no_wrap=True, overflow="ellipsis")
        # A recorded speedup (another machine, often another size: the post's 1,714× at 4096²)
        # is its own ratio, not one of the bars beside it: its cell says so (†), and so does
        # the head line, before anything that a narrow screen cuts off.
        marked = any(_recorded_ratio(f) for _, f, _ in self.rows)
        head = (
            "time (bar) · speedup vs NumPy · †: recorded ratio"
            if marked
            else "time per step (bar), speedup vs NumPy"
        )
        out.append(_fit(head, width).rstrip(), style="bold")
        for title, (_, fig, current) in zip(titles, self.rows):
            out.append("\n")
            out.append(_fit(title, label_width), style="bold reverse" if current else "")
            out.append(" ")
            if fig is None or fig.median is None:
                what = "measuring…" if fig is not None and fig.source == "measuring" else "—"
                out.append(_fit(what, bar_width + 18), style="italic")
                out.append("\n")
                continue
            cells = max(1, round(bar_width * fig.median / top)) if top else 1
            recorded = fig.origin == "recorded"
            glyph = "░" if fig.source == "fallback" else "█"
            colour = "$warning" if fig.source == "fallback" else ("$accent" if current else "$primary")
            out.append(glyph * cells, style=_theme_colour(self, colour))
            out.append(" " * (bar_width - cells + 1))
            dagger = "†" if _recorded_ratio(fig) else ""
            out.append(f"{fmt_time(fig.median):>9}{fmt_speedup(fig.speedup) + dagger:>8}")
            out.append("\n")
            style = _theme_colour(self, "$warning") if recorded else "dim"
            tag = (f"{dagger} " if dagger else "") + visible(_tag_within(fig, width), one_line=True)
            # under its bar where it fits, else from the line's start ("here (cpu) ·…" was cut)
            indent = label_width + 1 if len(tag) <= width - label_width - 1 else max(0, width - len(tag))
            out.append(" " * indent)
            out.append(_fit(tag, width - indent), style=f"italic {style}")
        return out


MIN_BAR = 8  # a staircase bar's fewest cells before its label is shortened


def _tag_within(fig: Figure, width: int) -> str:
    """`fig.tag` in `width` columns if it can be: a recording's time of day goes first (the deck
    bar says when it was recorded), then the date."""
    day = fig.when.split(" ")[0] if len(fig.when) > 10 else fig.when  # "2026-01-02 03:04 UTC"
    for when in (fig.when, day, ""):
        tag = " · ".join(p for p in (fig.origin, fig.statistic, fig.where, when) if p)
        if len(tag) <= width - 2:
            return tag
    return tag


def _recorded_ratio(fig: Figure | None) -> bool:
    """Whether `fig`'s speedup was recorded elsewhere (a deck's or a rehearsal's figure shown as
    a fallback): a ratio of its own measurements, not of the bars beside it."""
    return fig is not None and fig.source == "fallback" and fig.speedup is not None


def _fit(text: str, width: int) -> str:
    """`text` padded or cut (with an ellipsis) to exactly `width` cells."""
    if len(text) <= width:
        return text.ljust(width)
    return text[: max(0, width - 1)] + "…"


def speedup_caution(result: RunResult) -> str:
    """Why a live speedup should not be read as printed, short enough to show under it; ''
    when it can: unpaired (NumPy measured apart, at another moment), a wide paired interval
    (high/low > 1.2), or the noise check fired during the run."""
    from gpuplay.core.measure.stats import WIDE_INTERVAL, PairedSpeedup

    if is_baseline(result.spec):
        return ""  # NumPy is its own baseline: 1× by definition
    paired = PairedSpeedup.from_dict(result.speedup)
    reasons = []
    if paired is None:
        reasons.append("unpaired: NumPy was measured apart, at another moment")
    elif paired.wide and paired.low is not None and paired.high is not None:
        # Short enough for its own line under the digits on a projector (the long form was cut
        # at 1920×1080: "is wide (high/low 1.43 > 1.2…").
        reasons.append(
            f"wide interval {paired.low:.3g}–{paired.high:.3g}× (high/low {paired.width_ratio:.2f} > "
            f"{WIDE_INTERVAL}): noisy, or too few pairs"
        )
    elif paired.wide:
        reasons.append(paired.reason())
    if result.unstable or result.noise_warnings:
        reasons.append("the noise check fired during this run")
    return "; ".join(reasons)


def speedup_mark(result: RunResult) -> str:
    """' · ~ <why>' when the live speedup should not be read as printed; its 95% interval when it can."""
    from gpuplay.core.measure.stats import PairedSpeedup

    caution = speedup_caution(result)
    if caution:
        return f"\n~ {caution}"  # a line of its own: the reason is read whole, never cut
    paired = PairedSpeedup.from_dict(result.speedup)
    if paired is None or paired.low is None or paired.high is None:
        return ""
    return f" · 95% {paired.low:.3g}–{paired.high:.3g}×"


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


class PresenterApp(TextNotifications):  # a deck's and a result's text shown as text
    CSS_PATH = Path(__file__).parent / "presenter.tcss"
    TITLE = "gpuplay demo"

    # A presenter clicker sends PageDown/PageUp, some also b or . (blank) and Home/End.
    BINDINGS = [
        Binding("right,space,pagedown", "step(1)", "next", key_display="→"),
        Binding("left,pageup", "step(-1)", "previous", key_display="←"),
        Binding("home", "jump('first')", "first", show=False),
        Binding("end", "jump('last')", "last", show=False),
        Binding("b,full_stop", "blank", "blank", key_display="b"),
        Binding("f", "big_number", "big number"),
        Binding("t", "timer", "timer"),
        Binding("g", "goto", "go to"),
        *(Binding(str(d), f"digit({d})", show=False) for d in range(10)),
        Binding("backspace", "digit(-1)", show=False),
        Binding("enter", "enter", show=False),
        Binding("escape", "escape", show=False),
        Binding("r", "rerun", "re-run"),
        Binding("n", "toggle_notes", "notes"),
        Binding("q", "quit_asked", "quit"),
        Binding("y", "quit_confirmed", show=False),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        deck: Deck,
        *,
        replay: Recording | None = None,
        fallback: Recording | None = None,
        theme: str | None = None,
        autostart: bool = True,
        start_step: int = 0,
        remember: bool = True,
        earlier: dict[RunSpec, RunResult] | None = None,
    ) -> None:
        super().__init__()
        self.deck = deck
        self.replay = replay
        self.fallback = fallback or replay
        self.autostart = autostart
        self.remember = remember  # save the step per deck for `--resume`
        apply_theme(self, theme)
        self.index = min(max(start_step, 0), len(deck.steps) - 1)
        self.measured: dict[RunSpec, RunResult] = {}  # this session's live results
        # Results this tab measured before a reload or restart (core/talkresults): shown again,
        # marked "earlier in this talk", never re-measured.
        self.earlier: dict[RunSpec, RunResult] = dict(earlier or {}) if replay is None else {}
        self.measured.update(self.earlier)
        self.failed: dict[RunSpec, RunResult] = {}
        self.run_id = 0
        self.cancel = threading.Event()
        self.measure_lock = threading.Lock()  # one measurement at any time
        self.running: RunSpec | None = None
        self.phase = ""
        self.samples: list[float] = []
        self.session_log = SessionLog()  # like every command: no finished measurement is lost
        self.goto: str | None = None  # digits typed after `g`, None when not going anywhere
        self.quit_pending = False
        self.timer_started: float | None = None  # shown when set

    # -- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="deck-bar")
        yield Static(id="step-title")
        with Horizontal(id="middle"):
            with Vertical(id="figure"):
                yield BigNumber("", id="speedup")
                yield Static(id="speedup-note")
                yield Static(id="detail")
            yield Staircase(id="staircase")
        # Shown instead of the figure on a deck's sweep step.
        yield SweepView(id="deck-sweep", interactive=False)
        yield Static(id="caption")
        yield Static(id="notes")
        yield Static(id="blank")
        yield Static(id="prompt", classes="hidden")
        yield Footer()

    def on_mount(self) -> None:
        sections: dict[Any, int] = {}
        for s in self.deck.steps:
            sections[s.section] = sections.get(s.section, 0) + 1
        longest = max(sections.values())
        self.query_one(Staircase).fit(longest)
        # The chart's height is set once for the whole talk, and the panels around it have fixed
        # heights: the big number takes what is left of the screen and nothing jumps.
        self.query_one("#middle").styles.min_height = 1 + 2 * longest
        self.set_interval(1.0, self.tick_clock)
        self.show_step()
        for rec in {id(r): r for r in (self.replay, self.fallback) if r is not None}.values():
            if rec.missing:
                self.notify(
                    f"{rec.path.name if rec.path else 'recording'}: an older recording without "
                    + "; without ".join(rec.missing),
                    severity="warning",
                    timeout=8,
                    markup=False,
                )

    def on_resize(self, event: Any) -> None:
        # On a short screen (80×24) the speaker notes give way to the figure; `n` still shows them.
        self.query_one("#notes").set_class(event.size.height < 30, "cramped")
        self.call_after_refresh(self.refresh_figures)  # their lines are broken to the new width

    def on_unmount(self) -> None:
        self.cancel.set()
        from gpuplay.core.engine import shutdown_shared

        shutdown_shared()  # a step mid-compile must not hold the projector hostage

    # -- navigation ---------------------------------------------------------------------
    def go(self, index: int) -> None:
        self.quit_pending = False
        if self.screen.has_class("blanked"):
            self.screen.remove_class("blanked")  # the first key after a blank brings the slide back
            self.draw_prompt()
            return
        index = min(max(index, 0), len(self.deck.steps) - 1)
        if index != self.index:
            self.index = index
            self.show_step()
        self.draw_prompt()

    def action_step(self, delta: int) -> None:
        self.go(self.index + delta)

    def action_jump(self, where: str) -> None:
        self.go(0 if where == "first" else len(self.deck.steps) - 1)

    def action_blank(self) -> None:
        self.screen.toggle_class("blanked")

    def action_big_number(self) -> None:
        big = not self.screen.has_class("big-number")
        self.screen.set_class(big, "big-number")

    def action_timer(self) -> None:
        """First `t` shows the talk's timer; each later one resets it to 0:00."""
        self.timer_started = time.monotonic()
        self.draw_bar()

    def action_goto(self) -> None:
        self.goto = ""
        self.quit_pending = False
        self.screen.remove_class("blanked")
        self.draw_prompt()

    def action_digit(self, digit: int) -> None:
        if self.goto is None:
            return
        self.goto = self.goto[:-1] if digit < 0 else (self.goto + str(digit))[:4]
        n = len(self.deck.steps)
        if self.goto and int(self.goto) * 10 > n:  # no further digit can name a step: go now
            self.action_enter()
            return
        self.draw_prompt()

    def action_enter(self) -> None:
        if self.goto is None:
            return
        typed, self.goto = self.goto, None
        if typed and 1 <= int(typed) <= len(self.deck.steps):
            self.go(int(typed) - 1)
        else:
            self.draw_prompt()
            if typed:
                self.notify(f"no step {typed}: this deck has 1 to {len(self.deck.steps)}", severity="warning")

    def action_escape(self) -> None:
        self.goto = None
        self.quit_pending = False
        self.draw_prompt()

    def action_quit_asked(self) -> None:
        if self.quit_pending:
            self.exit()
            return
        self.goto = None
        self.quit_pending = True
        self.screen.remove_class("blanked")  # the question must be seen
        self.draw_prompt()

    def action_quit_confirmed(self) -> None:
        if self.quit_pending:
            self.exit()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("digit", "enter"):
            return self.goto is not None  # digits mean nothing outside `g`
        if action == "escape":
            return self.goto is not None or self.quit_pending
        if action == "quit_confirmed":
            return self.quit_pending
        return True

    def action_rerun(self) -> None:
        if self.replay is not None:
            self.notify("replaying a recording: nothing is measured", severity="warning")
            return
        spec = self.step.spec
        self.measured.pop(spec, None)
        self.failed.pop(spec, None)
        self.show_step()

    def action_toggle_notes(self) -> None:
        notes = self.query_one("#notes")
        shown = not (notes.has_class("hidden") or notes.has_class("cramped"))
        notes.remove_class("cramped")
        notes.set_class(shown, "hidden")

    @property
    def step(self) -> DeckStep:
        return self.deck.steps[self.index]

    # -- figures --------------------------------------------------------------------------
    def spec_of(self, i: int) -> RunSpec:
        """Step i's spec: the deck's, or in replay the one the rehearsal measured for it."""
        step = self.deck.steps[i]
        return self.replay.spec_for(i, step.spec) if self.replay is not None else step.spec

    def result_for(self, spec: RunSpec) -> RunResult | None:
        if self.replay is not None:
            return self.replay.get(spec)
        return self.measured.get(spec) or self.failed.get(spec)

    def figure(self, i: int) -> Figure | None:
        step = self.deck.steps[i]
        if step.sweep is not None:  # its figures are the sweep's: no single spec's label or bar
            return Figure(None, None, "unavailable", SWEEP_NOT_REPLAYED if self.replay is not None else "")
        if self.replay is None and step.spec == self.running:
            median = summarize(self.samples).median if self.samples else None  # type: ignore[union-attr]
            base = self.measured.get(baseline_spec(step.spec))
            speedup = base.median / median if base is not None and base.median and median else None
            if is_baseline(step.spec) and median:
                speedup = 1.0
            busy = "busy" in self.phase  # another session holds the device: say so, no ellipsis
            return Figure(
                median,
                speedup,
                "measuring",
                self.phase if busy else f"{self.phase}…",
                where=f"here ({step.spec.device})",
                when="now",
                statistic=f"running median of {len(self.samples)}" if self.samples else "",
            )
        spec = self.spec_of(i)
        result = self.result_for(spec)
        if result is None and self.replay is None:
            return None
        baseline = self.result_for(baseline_spec(spec))
        where = f"on {self.replay.device}" if self.replay is not None else "here"
        fallback = None if self.replay is not None else self.fallback
        fig = figure_for(
            step,
            result,
            baseline,
            source="recorded" if self.replay else "live",
            fallback=fallback,
            where=where,
            recording=self.replay,
        )
        if result is not None and self.earlier.get(spec) is result and fig.source == "live":
            fig.where = f"earlier in this talk, {fig.where}"
            fig.when = f"{fig.when}, before a reload" if fig.when else "before a reload"
        paired = result is not None and isinstance(result.speedup, dict)
        if fig.source in ("live", "recorded") and baseline is None and not is_baseline(spec) and not paired:
            fig.detail += " · NumPy baseline " + ("measuring…" if self.running else "not recorded")
        return fig

    def threads_of(self, i: int) -> int | None:
        """The threads step i runs (or ran) with, for its caption."""
        if self.replay is not None:
            r = self.replay.get(self.spec_of(i))
            return r.spec.threads if r is not None else None
        return live_spec(self.deck.steps[i].spec).threads

    # -- drawing ----------------------------------------------------------------------------
    def draw_bar(self) -> None:
        n = len(self.deck.steps)
        if self.replay is not None:
            mode = Text(f" {visible(self.replay.label, one_line=True)} ", style="bold reverse")
        else:
            from gpuplay.core.hw.system import cpu_count, cpu_name

            mode = Text(
                f" live on {visible(cpu_name(), one_line=True)} ({cpu_count()} cores) ", style="bold reverse"
            )
        clock = ""
        if self.timer_started is not None:
            elapsed = int(time.monotonic() - self.timer_started)
            clock = f"⏱ {elapsed // 60}:{elapsed % 60:02d}   "
        bar = Table.grid(expand=True)
        bar.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        bar.add_column(no_wrap=True)
        bar.add_column(no_wrap=True, justify="right")
        # Text, never markup, and every control character shown: a deck's title may hold an
        # OSC that would retitle the speaker's terminal, or [/] that would break the bar.
        title = Text(visible(self.deck.title, one_line=True), style="bold")
        bar.add_row(title, Text(f"{clock}step {self.index + 1} of {n}   "), mode)
        self.query_one("#deck-bar", Static).update(bar)

    def tick_clock(self) -> None:
        if self.timer_started is None:  # the talk's clock (t) in the top bar
            return
        try:
            self.draw_bar()
        except NoMatches:  # the interval's last tick can land while the app closes, its bar gone
            pass

    def draw_prompt(self) -> None:
        prompt = self.query_one("#prompt", Static)
        if self.quit_pending:
            text = "End the talk?  q or y: quit · Escape or any step key: stay"
        elif self.goto is not None:
            text = f"go to step: {self.goto}▏ (1–{len(self.deck.steps)}, Enter: go · Escape: cancel)"
        else:
            text = ""
        prompt.update(Text(text, style="bold"))
        prompt.set_class(not text, "hidden")

    def show_step(self) -> None:
        from gpuplay.core.hw.system import cpu_count
        from gpuplay.core.reports.decks import caption_text, save_position

        step = self.step
        if self.remember:
            save_position(self.deck, self.index)
        self.draw_bar()
        self.query_one("#step-title", Static).update(Text(visible(step.title, one_line=True), style="bold"))
        caption = caption_text(step, self.threads_of(self.index), cpu_count())
        self.query_one("#caption", Static).update(Text(visible(caption)))
        self.query_one("#notes", Static).update(Text(visible(step.notes or ""), style="italic"))
        sweeping = show_sweep_step(self, step, live=self.replay is None and self.autostart)
        if self.replay is None and self.autostart and not sweeping:
            if self.result_for(step.spec) is None:
                self.start_measurement([step.spec, baseline_spec(step.spec)])
            elif (
                baseline_spec(step.spec) not in self.measured
                and not is_baseline(step.spec)
                and not isinstance(getattr(self.result_for(step.spec), "speedup", None), dict)  # paired
            ):
                self.start_measurement([baseline_spec(step.spec)])
        self.refresh_figures()

    def refresh_figures(self) -> None:
        fig = self.figure(self.index)
        digits = self.query_one("#speedup", BigNumber)
        note = self.query_one("#speedup-note", Static)
        # A live figure that should not be read as printed (unpaired, a wide interval, noise)
        # carries the app's '~' and the warning colour, with its reason under it.
        caution = ""
        if fig is not None and fig.source == "live" and fig.speedup is not None and fig.result is not None:
            caution = speedup_caution(fig.result)
        if fig is not None and fig.speedup is not None:
            value = f"{fig.speedup:,.0f}x" if fig.speedup >= 100 else f"{fig.speedup:.3g}x"
            digits.update(("~" if caution else "") + value)
        else:
            digits.update("-")
        digits.set_class(bool(caution), "unstable")
        digits.set_class(
            not caution and fig is not None and fig.speedup is not None and fig.speedup < 1, "slower"
        )
        digits.set_class(fig is None or fig.source in ("measuring", "unavailable"), "pending")
        digits.set_class(fig is not None and fig.source == "fallback", "fallback")
        label = Text("vs NumPy on the CPU", style="bold")
        if fig is not None and fig.median is not None:
            statistic = fig.statistic.split(" of ")[0].split(" at ")[0] or "median"
            label = Text(f"{statistic} {fmt_time(fig.median)} · ", style="bold") + label
        if fig is not None and fig.source == "live" and fig.speedup is not None and fig.result is not None:
            mark = visible(speedup_mark(fig.result))
            label.append(mark, style=f"bold {_theme_colour(self.screen, '$warning')}" if caution else "bold")
        if fig is not None and fig.source == "fallback":
            label = Text("RECORDED FIGURE, not measured here · ", style="bold") + label
        if fig is not None and fig.source != "unavailable":
            label.append("\n")
            label.append(visible(fig.tag, one_line=True), style="italic")
        elif fig is not None and fig.detail:
            # A step that cannot run here says why under its grey digits, where the figure would
            # be read (it was a bare grey block; the reason only in the smaller line below).
            why = fig.detail.split(" · ")[0]
            label = Text(visible(why, one_line=True), style=f"bold {_theme_colour(self.screen, '$warning')}")
            label.append("\nno figure for this step here", style="italic")
        note_text = keep_together(label, note.content_size.width)  # a figure never cut by …
        note.update(note_text)
        note.set_class(
            fig is not None and fig.origin == "recorded" and fig.source != "unavailable", "recorded"
        )
        detail = self.query_one("#detail", Static)
        whole = visible(fig.detail) if fig is not None else "queued…"
        # At most DETAIL_LINES lines (the digits above give way to them); a longer reason ends in
        # "…" and is whole in the tooltip, never cut off without a mark.
        # The column clips what does not fit under the digits (3 rows at least) and the note.
        room = self.query_one("#figure").content_size.height - 3 - min(note_text.plain.count("\n") + 1, 7)
        lines = max(1, min(DETAIL_LINES, room))
        shown, cut = at_most(Text(whole, style="italic"), detail.content_size.width, lines)
        detail.update(shown)
        detail.tooltip = whole if cut else None
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
                    if phase not in ("timed", "paired"):  # a paired run's samples are "paired"
                        return
                    pending.append(dt)
                    now = time.monotonic()
                    if now - last[0] >= PROGRESS_INTERVAL_S:
                        batch = pending[:]
                        pending.clear()
                        last[0] = now
                        self.post_message(StepProgress(run_id, batch))

                # The step is timed in interleaved pairs with its NumPy baseline (as the app's
                # Live tab does): a speedup with an interval, not two medians taken minutes apart
                # on a machine whose load changed in between (21.5× then 2.06× after a reload).
                paired = k == 0 and not is_baseline(spec)
                result = measure(
                    live_spec(spec),
                    on_sample if k == 0 else None,
                    cancel,
                    on_phase=(lambda ph, _d: self.post_message(StepPhase(run_id, ph))) if k == 0 else None,
                    paired_with=live_spec(baseline_spec(spec)) if paired else None,
                )
                self.post_message(SpecMeasured(run_id, spec, result))
                if k == 0 and result.status != "ok":
                    return  # no speedup to compute for a step that did not run
                if paired and isinstance(result.speedup, dict):
                    return  # the pairs gave the speedup: no separate NumPy run to wait for

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
            self.earlier.pop(key, None)
            if self.remember and self.replay is None:
                from gpuplay.core.reports.talkresults import save_results

                problem = save_results(self.deck, self.measured)
                if problem:
                    self.notify(problem, severity="warning", markup=False)
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
