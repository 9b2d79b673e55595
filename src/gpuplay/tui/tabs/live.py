"""The Live tab: the speedup in big digits, the run's figures, its steps as they come, the claim."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message

from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import baseline_spec
from gpuplay.tui import viewmodels
from gpuplay.tui.messages import RunFinished, RunPhase, RunProgress
from gpuplay.tui.tabs.base import PlaygroundTab
from gpuplay.tui.widgets import ClaimLine, SpeedupDigits, StatsPanel, StepChart


class LiveTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Live", "Live", "live"

    def __init__(self) -> None:
        super().__init__()
        # Baseline spec (or paired configuration) -> why its speedup could not be measured:
        # shown where the speedup would be, for as long as it applies (not a passing toast).
        self.baseline_problems: dict[RunSpec, str] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(id="live-top"):
            yield SpeedupDigits(id="speedup")
            with VerticalScroll(id="stats-scroll", can_focus=False):
                yield StatsPanel(id="stats")
        yield StepChart(id="chart")
        yield ClaimLine(id="claim")

    def routed(self, message: Message) -> None:
        if isinstance(message, RunFinished):
            r = message.result
            if message.role == "baseline" and r.status in ("failed", "refused"):
                self.baseline_problems[r.spec] = r.message
        elif isinstance(message, RunPhase) and self.shown:
            self.refresh_stats()
        elif isinstance(message, RunProgress):
            self.redraw_if_shown()

    def refresh_stats(self) -> None:
        host = self.host
        phase = viewmodels.phase_line(host.session, host.probed, host.runs.paused.is_set())
        self.query_one(StatsPanel).show(
            host.spec, host.session.timed_summary(), phase, viewmodels.stats_info(host.session)
        )

    def refresh_view(self) -> None:
        session = self.host.session
        self.refresh_stats()
        big = viewmodels.speedup_view(session, self.baseline_problem())
        versus = viewmodels.baseline_words(self.host.spec)
        self.query_one(SpeedupDigits).show(big.speedup, big.note, big.marker, big.reason, big.short, versus)
        self.query_one(ClaimLine).show(session.scenario)
        self.hold_top(session.live_result is None)
        if session.samples:
            self.draw_chart()
        else:
            # A new run (a key: a lever, a preset, a scenario): the frame that shows the choice
            # does not wait for the cleared chart's plotext build (~20 ms). It is drawn
            # right after that frame, from the session as it is then.
            self.call_after_refresh(self.draw_chart)

    def hold_top(self, hold: bool) -> None:
        """While a run is measured, the figures above the chart keep the height they had: a new
        run's few rows would shrink them and grow the chart, which plotext then builds again at
        its new size in the frame of the key that started the run, then again when the result
        brings the rows back. Released when the run's result is in, or on a resize."""
        top = self.query_one("#live-top")
        if not hold:
            if top.styles.min_height is not None:
                top.styles.min_height = None
        elif top.styles.min_height is None and top.outer_size.height:
            top.styles.min_height = top.outer_size.height

    def on_resize(self) -> None:
        self.hold_top(False)

    def draw_chart(self) -> None:
        session = self.host.session
        summary = session.timed_summary()
        title = viewmodels.chart_title(session)
        self.query_one(StepChart).show(session.samples, summary.median if summary else None, title)

    def baseline_problem(self) -> str:
        """Why the speedup of the configuration on screen could not be measured, if it could not.

        A paired job's result carries the configuration's spec; a baseline run alone, its own."""
        spec = self.host.spec
        if spec is None:
            return ""
        if spec in self.baseline_problems:
            return self.baseline_problems[spec]
        try:
            return self.baseline_problems.get(baseline_spec(spec), "")
        except (KeyError, ValueError):
            return ""
