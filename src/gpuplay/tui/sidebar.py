"""The sidebar: the scenario list and the controls panel under it.

Arrowing through the list chooses the scenario where the cursor stops (debounced): the sidebar
posts `Sidebar.ScenarioChosen` and the App measures it.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from gpuplay.core.catalogue.scenarios import ScenarioSet
from gpuplay.core.storage.safetext import visible
from gpuplay.tui.widgets import ControlsPanel

DEBOUNCE_S = 0.25


class Sidebar(Vertical):
    class ScenarioChosen(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def __init__(self, scenarios: ScenarioSet, **kw: Any) -> None:
        super().__init__(**kw)
        self.scenarios = scenarios
        self._timer: Any = None

    def compose(self) -> ComposeResult:
        yield OptionList(*self._options(), id="scenarios")
        with VerticalScroll(id="controls-scroll", can_focus=False):  # the list keeps its height
            yield ControlsPanel(id="controls")

    def on_mount(self) -> None:
        self.query_one("#scenarios", OptionList).border_title = "scenarios"

    def reload(self) -> None:
        """List the scenario set again (a code file joined it), the highlight kept where it was."""
        scenarios = self.query_one("#scenarios", OptionList)
        current = scenarios.highlighted_option.id if scenarios.highlighted_option is not None else None
        scenarios.clear_options()
        scenarios.add_options(self._options())
        if current is not None:
            with scenarios.prevent(OptionList.OptionHighlighted):  # not a new choice: nothing re-runs
                scenarios.highlighted = scenarios.get_option_index(current)

    def _options(self) -> list[Option]:
        # A title is the file's text, not markup: `[/]` in it must not take the app down.
        return [
            Option(Text(visible(s.title, one_line=True)), id=s.name)
            for s in self.scenarios.scenarios.values()
        ]

    def highlight(self, name: str) -> None:
        """Move the list's highlight to `name` (the palette's choice): chosen as arrows choose."""
        scenarios = self.query_one("#scenarios", OptionList)
        scenarios.highlighted = scenarios.get_option_index(name)

    @on(OptionList.OptionHighlighted, "#scenarios")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        name = event.option.id
        # Toasts sit over this list: moving in it means reading it, so they make way (a refusal's
        # reason stays in the Live figures' status line).
        self.app.clear_notifications()
        if self._timer is not None:
            self._timer.stop()
        if name is not None:  # arrowing through the list restarts once, where the cursor stops
            self._timer = self.set_timer(DEBOUNCE_S, lambda: self.post_message(self.ScenarioChosen(name)))
