"""The playground's tabs, in the order of their keys (1–8). See docs/architecture.md, "Tabs"."""

from textual.binding import Binding

from gpuplay.tui.tabs.base import Host, PlaygroundTab, fit_labels
from gpuplay.tui.tabs.code import CodeTab
from gpuplay.tui.tabs.collectives import CollectivesTab
from gpuplay.tui.tabs.compare import CompareTab
from gpuplay.tui.tabs.live import LiveTab
from gpuplay.tui.tabs.profile import ProfileTab
from gpuplay.tui.tabs.sweep import SweepTab
from gpuplay.tui.tabs.telemetry import (
    TelemetryColumn,
    TelemetryFeed,
    TelemetryTab,
    draw_telemetry,
    draw_visible_telemetry,
)
from gpuplay.tui.tabs.tune import TuneTab

# The tabs in the order of their keys: key 1 shows the first. Adding a tab: docs/architecture.md.
TAB_CLASSES: tuple[type[PlaygroundTab], ...] = (
    LiveTab,
    CompareTab,
    CodeTab,
    TelemetryTab,
    ProfileTab,
    CollectivesTab,
    SweepTab,
    TuneTab,
)
TAB_IDS = tuple(t.TAB_ID for t in TAB_CLASSES)


def tab_bindings() -> list[Binding]:
    """Keys 1, 2, … show the tabs (each binding's id, tab_<id>, is what config.toml remaps)."""
    return [Binding(str(i), f"tab('{t.TAB_ID}')", t.TAB_ID, show=False) for i, t in enumerate(TAB_CLASSES, 1)]


__all__ = [
    "TAB_CLASSES",
    "TAB_IDS",
    "tab_bindings",
    "CodeTab",
    "CollectivesTab",
    "CompareTab",
    "Host",
    "LiveTab",
    "ProfileTab",
    "SweepTab",
    "PlaygroundTab",
    "TelemetryColumn",
    "TelemetryFeed",
    "TelemetryTab",
    "TuneTab",
    "draw_telemetry",
    "draw_visible_telemetry",
    "fit_labels",
]
