"""The machine while it measures: the Telemetry tab, and the same figures in a side column on
wide screens. Both draw the App's latest snapshot and the sampler's history, at the pace the
App's tick says (tui/viewmodels.telemetry_pace: every sample while measuring, slowly idle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widget import Widget

from gpuplay.core.studies.session import LiveSession
from gpuplay.tui.messages import TelemetryTick
from gpuplay.tui.tabs.base import Host, PlaygroundTab
from gpuplay.tui.viewmodels import TelemetryPace, telemetry_pace
from gpuplay.tui.widgets import TelemetryChart, TelemetryPanel

if TYPE_CHECKING:
    from gpuplay.core.measure.telemetry import Sampler, Snapshot


class TelemetryFeed:
    """The machine's figures while the app runs: a Sampler thread whose snapshots reach the App
    as TelemetryTick messages, the latest snapshot, and why there is no GPU telemetry if none.

    The sampler (and the telemetry module: psutil, the NVML glue) is made in `start`, which the
    App calls after its first frame: the first frame does not wait for those imports."""

    def __init__(
        self, app: App[Any], interval: float, enabled: bool, engine_pid: Callable[[], int | None]
    ) -> None:
        self.interval = interval  # while measuring; slower when idle (`tick`)
        self._app = app
        self.enabled, self._engine_pid = enabled, engine_pid
        self.sampler: Sampler | None = None
        self.latest: Snapshot | None = None
        self.nvml_line = ""

    def _post(self, snapshot: Snapshot) -> None:  # on the sampler's thread
        self._app.post_message(TelemetryTick(snapshot))

    def start(self) -> None:
        if not self.enabled or self.sampler is not None:
            return
        from gpuplay.core.measure.telemetry import Sampler, nvml_status

        self.sampler = Sampler(self.interval, on_snapshot=self._post)
        self.sampler.engine_pid = self._engine_pid
        self.nvml_line = nvml_status()
        self.sampler.start()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def tick(self, snapshot: Snapshot, session: LiveSession) -> TelemetryPace:
        """Take a snapshot; the pace says how often to sample and redraw now (idle: slowly)."""
        self.latest = snapshot
        pace = telemetry_pace(session, self.interval)
        if self.sampler is not None:
            self.sampler.interval = pace.sample_s  # 1 Hz idle: sampling costs CPU too
        return pace


def draw_telemetry(widget: Widget, panel_s: float = 0.0, chart_s: float = 0.0) -> None:
    """Fill `widget`'s panel and chart from the App (at most every `panel_s`/`chart_s` seconds)."""
    host = cast(Host, widget.app)
    feed = host.telemetry
    device = host.spec.device if host.spec is not None else "cpu"
    history = list(feed.sampler.history) if feed.sampler is not None else []
    widget.query_one(TelemetryPanel).show(feed.latest, feed.nvml_line, device, panel_s)
    widget.query_one(TelemetryChart).show(history, device, chart_s)


class TelemetryTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Telemetry", "Tel", "telemetry"

    def compose(self) -> ComposeResult:
        yield TelemetryPanel(id="telemetry-full")
        yield TelemetryChart(id="tchart-full")

    def refresh_view(self) -> None:
        draw_telemetry(self)


class TelemetryColumn(Vertical):
    """The side column (hidden on narrow screens, where the tab shows the same)."""

    def compose(self) -> ComposeResult:
        yield TelemetryPanel(id="telemetry-side")
        yield TelemetryChart(id="tchart-side")


def draw_visible_telemetry(screen: Screen[Any], panel_s: float = 0.0, chart_s: float = 0.0) -> None:
    """Redraw the telemetry on screen (the side column, the tab); a tick at its pace."""
    side = not screen.has_class("narrow")
    if side:
        draw_telemetry(screen.query_one(TelemetryColumn), panel_s, chart_s)
    tab = screen.query_one(TelemetryTab)
    if tab.shown and tab.ready:
        draw_telemetry(tab, panel_s, chart_s)
    sampler = cast(Host, screen.app).telemetry.sampler
    if sampler is not None:  # GPM counters only while a panel that shows them is on screen
        sampler.activity = side or tab.shown
