"""The playground's tabs, in the order of their keys (1–7). See docs/architecture.md, "Tabs"."""

from gpuplay.tui.tabs.base import Host, PlaygroundTab, fit_labels
from gpuplay.tui.tabs.code import CodeTab
from gpuplay.tui.tabs.collectives import CollectivesTab
from gpuplay.tui.tabs.compare import CompareTab
from gpuplay.tui.tabs.live import LiveTab
from gpuplay.tui.tabs.profile import ProfileTab
from gpuplay.tui.tabs.sweep import SweepTab
from gpuplay.tui.tabs.telemetry import TelemetryColumn, TelemetryTab, draw_telemetry

__all__ = [
    "CodeTab",
    "CollectivesTab",
    "CompareTab",
    "Host",
    "LiveTab",
    "ProfileTab",
    "SweepTab",
    "PlaygroundTab",
    "TelemetryColumn",
    "TelemetryTab",
    "draw_telemetry",
    "fit_labels",
]
