"""The main screen's composition (sidebar, tabs, the side telemetry column) and how it adapts
to the terminal's size."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent

from gpuplay.core.scenarios import ScenarioSet
from gpuplay.tui.sidebar import Sidebar
from gpuplay.tui.tabs import TAB_CLASSES, PlaygroundTab, TelemetryColumn, fit_labels


def compose_main(scenarios: ScenarioSet) -> ComposeResult:
    yield Header()
    with Horizontal(id="body"):
        yield Sidebar(scenarios, id="sidebar")
        with TabbedContent(id="tabs", initial="live"):
            for tab in TAB_CLASSES:
                yield tab()
        yield TelemetryColumn(id="side-telemetry")
    yield Footer()


def adapt_layout(screen: Screen[object], width: int, height: int) -> None:
    """Classes for the stylesheet (narrow, short), the footer's density, the tab labels."""
    screen.set_class(width < 150, "narrow")
    screen.set_class(height < 32, "short")
    # Compact footer keys below 120 columns, and no palette hint below 100 (ctrl+p and the
    # help still open it): at 80 the full footer cuts off help and quit.
    for footer in screen.query(Footer):
        footer.compact = width < 120
        if footer.show_command_palette != (width >= 100):
            footer.show_command_palette = width >= 100
            footer.refresh(recompose=True)  # not a recomposing reactive in Textual
    tabbed = screen.query_one(TabbedContent)
    screen.call_after_refresh(fit_labels, tabbed, screen.query(PlaygroundTab))  # once the bar has its width
