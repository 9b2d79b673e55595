"""The main screen's composition: sidebar, tabs and the side telemetry column."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, OptionList, TabbedContent
from textual.widgets.option_list import Option

from gpuplay.core.safetext import visible
from gpuplay.core.scenarios import ScenarioSet
from gpuplay.tui.tabs import (
    CodeTab,
    CollectivesTab,
    CompareTab,
    LiveTab,
    PlaygroundTab,
    ProfileTab,
    SweepTab,
    TelemetryColumn,
    TelemetryTab,
)
from gpuplay.tui.widgets import ControlsPanel


def make_tabs(code_paths: list[Path]) -> list[PlaygroundTab]:
    """The tabs, in the order of their keys 1–7 (the App's BINDINGS name them by TAB_ID)."""
    return [
        LiveTab(),
        CompareTab(),
        CodeTab(code_paths),
        TelemetryTab(),
        ProfileTab(),
        CollectivesTab(),
        SweepTab(),
    ]


def compose_main(scenarios: ScenarioSet, code_paths: list[Path] | None = None) -> ComposeResult:
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
            yield from make_tabs(code_paths or [])
        yield TelemetryColumn(id="side-telemetry")
    yield Footer()
