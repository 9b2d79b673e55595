"""The main screen's composition: sidebar, tabs and the side telemetry column."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, OptionList, TabbedContent, TabPane
from textual.widgets.option_list import Option

from gpuplay.core.safetext import visible
from gpuplay.core.scenarios import ScenarioSet
from gpuplay.tui.collectives_view import CollectivesView
from gpuplay.tui.profile_view import ProfileView
from gpuplay.tui.roofline import RooflineChart
from gpuplay.tui.sweep_view import SweepView
from gpuplay.tui.widgets import (
    ClaimLine,
    CodeView,
    CompareView,
    ControlsPanel,
    SpeedupDigits,
    StatsPanel,
    StepChart,
    TelemetryChart,
    TelemetryPanel,
)


def compose_main(scenarios: ScenarioSet) -> ComposeResult:
    yield Header()
    with Horizontal(id="body"):
        with Vertical(id="sidebar"):
            # A title is the file's text, not markup: `[/]` in it must not take the app down.
            options = [
                Option(Text(visible(s.title, one_line=True)), id=s.name) for s in scenarios.scenarios.values()
            ]
            yield OptionList(*options, id="scenarios")
            yield ControlsPanel(id="controls")
        with TabbedContent(id="tabs", initial="live"):
            with TabPane("Live", id="live"):
                with Horizontal(id="live-top"):
                    yield SpeedupDigits(id="speedup")
                    yield StatsPanel(id="stats")
                yield StepChart(id="chart")
                yield ClaimLine(id="claim")
            with TabPane("Compare", id="compare"):
                yield CompareView()
                yield RooflineChart(id="roofline-chart")
            with TabPane("Code", id="code"):
                yield CodeView()
            with TabPane("Telemetry", id="telemetry"):
                yield TelemetryPanel(id="telemetry-full")
                yield TelemetryChart(id="tchart-full")
            with TabPane("Profile", id="profile"):
                yield ProfileView(id="profile-view")
            with TabPane("Collectives", id="collectives"):
                yield CollectivesView(id="collectives-view")
            with TabPane("Sweep", id="sweep"):
                yield SweepView(id="sweep-view")
        with Vertical(id="side-telemetry"):
            yield TelemetryPanel(id="telemetry-side")
            yield TelemetryChart(id="tchart-side")
    yield Footer()
