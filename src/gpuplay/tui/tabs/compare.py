"""The Compare tab: every configuration measured this session against its NumPy baseline, and
where each sits against the machine's roofline."""

from __future__ import annotations

from textual.app import ComposeResult

from gpuplay.core.studies.compare import attach_baselines
from gpuplay.tui import viewmodels
from gpuplay.tui.roofline import RooflineChart
from gpuplay.tui.tabs.base import PlaygroundTab
from gpuplay.tui.widgets import CompareView


class CompareTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Compare", "Comp", "compare"

    def compose(self) -> ComposeResult:
        yield CompareView()
        yield RooflineChart(id="roofline-chart")

    def refresh_view(self) -> None:
        rows = attach_baselines(self.host.session.results)
        self.query_one(CompareView).show(rows, viewmodels.compare_focus(self.host.spec))
        self.query_one(RooflineChart).show(rows)
