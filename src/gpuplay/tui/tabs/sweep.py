"""The Sweep tab: time per step against size for every configuration (the view and its child
process live in tui/sweep_view.py, shared with the presenter); it follows the scenario chosen
in the list until a sweep starts."""

from __future__ import annotations

from textual.app import ComposeResult

from gpuplay.tui.sweep_view import SweepView
from gpuplay.tui.tabs.base import PlaygroundTab


class SweepTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Sweep", "Swp", "sweep"

    def compose(self) -> ComposeResult:
        yield SweepView(id="sweep-view")

    def refresh_view(self) -> None:
        view = self.query_one(SweepView)
        view.follow(self.host.session.scenario, self.host.session.preset)
        view.refresh_view()
