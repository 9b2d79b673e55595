"""The machine while it measures: the Telemetry tab, and the same figures in a side column on
wide screens. Both draw the App's latest snapshot and the sampler's history, at the pace the
App's tick says (tui/viewmodels.telemetry_pace: every sample while measuring, slowly idle)."""

from __future__ import annotations

from typing import cast

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget

from gpuplay.tui.tabs.base import Host, PlaygroundTab
from gpuplay.tui.widgets import TelemetryChart, TelemetryPanel


def draw_telemetry(widget: Widget, panel_s: float = 0.0, chart_s: float = 0.0) -> None:
    """Fill `widget`'s panel and chart from the App (at most every `panel_s`/`chart_s` seconds)."""
    host = cast(Host, widget.app)
    spec = host.spec
    device = spec.device if spec is not None else "cpu"
    history = list(host.sampler.history) if host.sampler is not None else []
    widget.query_one(TelemetryPanel).show(host.latest, host.nvml_line, device, panel_s)
    widget.query_one(TelemetryChart).show(history, device, chart_s)


class TelemetryTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Telemetry", "Telem", "telemetry"

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
