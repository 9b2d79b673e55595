"""The main screen's composition (sidebar, tabs, the side telemetry column) and how it adapts
to the terminal's size."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, TabbedContent

from gpuplay.core.catalogue.scenarios import ScenarioSet
from gpuplay.tui.sidebar import Sidebar
from gpuplay.tui.tabs import TAB_CLASSES, PlaygroundTab, TelemetryColumn, fit_labels


class LabelledTabs(TabbedContent):
    """The tabs, their labels fitted to the bar's width each time it changes (after layout)."""

    def on_resize(self, event: events.Resize) -> None:
        fit_labels(self, self.query(PlaygroundTab), event.size.width)


class SteadyFooter(Footer):
    """Textual's footer, composed again only when the keys it shows changed. Textual recomposes it
    whenever a screen's bindings are said to change: closing the help screen (Escape) rebuilt and
    rendered its keys again, with the same keys."""

    _shown: Any = None

    def _keys(self) -> Any:
        return tuple(
            (b.key, b.key_display, b.description, b.action, b.show, b.tooltip, enabled, tooltip)
            for _, b, enabled, tooltip in self.screen.active_bindings.values()
        )

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if (
            self._shown is not None
            and self.is_attached
            and screen is self.screen
            and self._keys() == self._shown
        ):
            return
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        self._shown = self._keys() if self._bindings_ready else None
        yield from super().compose()


def compose_main(scenarios: ScenarioSet) -> ComposeResult:
    yield Header()
    with Horizontal(id="body"):
        yield Sidebar(scenarios, id="sidebar")
        with LabelledTabs(id="tabs", initial=TAB_CLASSES[0].TAB_ID):
            yield TAB_CLASSES[0]()
            for tab in TAB_CLASSES[1:]:  # not on screen at start: their widgets after the first frame
                yield tab().mount_after_first_frame()
        yield TelemetryColumn(id="side-telemetry")
    yield SteadyFooter()


SUB_TITLES = (  # the header's subtitle, longest first: the first that fits is shown whole
    "the same array code, NumPy → PyTorch → CuPy, CPU → GPU",
    "NumPy → PyTorch → CuPy, CPU → GPU",
    "NumPy → PyTorch → CuPy",
)
HEADER_ROOM = 28  # the header's icon and its margins (18), and "gpuplay — "


def sub_title_for(width: int) -> str:
    """The longest subtitle that fits a header `width` columns wide (at 80: "CPU → …" was cut)."""
    return next((t for t in SUB_TITLES if len(t) + HEADER_ROOM <= width), SUB_TITLES[-1])


def adapt_layout(screen: Screen[object], width: int, height: int) -> None:
    """Classes for the stylesheet (narrow, short), the footer's density, the header's subtitle."""
    screen.app.sub_title = sub_title_for(width)
    screen.set_class(width < 150, "narrow")
    screen.set_class(110 <= width < 150, "roomy")  # every control value shown (not compact)
    screen.set_class(height < 32, "short")
    # Compact footer keys below 120 columns, and no palette hint below 100 (ctrl+p and the
    # help still open it): at 80 the full footer cuts off help and quit.
    for footer in screen.query(Footer):
        footer.compact = width < 120
        if footer.show_command_palette != (width >= 100):
            footer.show_command_palette = width >= 100
            footer.refresh(recompose=True)  # not a recomposing reactive in Textual
