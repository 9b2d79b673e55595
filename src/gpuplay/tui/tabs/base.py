"""What every tab of the playground is: a TabPane that owns its widgets, its state and its workers.

The App composes the tabs (`TABS`), owns the session and the engine, and routes what happens
to every tab (`PlaygroundTab.routed`): engine results, phases and samples (tui/messages.py), nothing
else. A tab redraws itself (`refresh_view`) when it is shown and when something it shows
changed while it is shown; a hidden tab draws nothing, and catches up when it is shown.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from textual.message import Message
from textual.widget import Widget
from textual.widgets import ContentSwitcher, TabbedContent, TabPane

if TYPE_CHECKING:
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.studies.session import LiveSession
    from gpuplay.tui.runs import LiveRuns


class Host(Protocol):
    """What a tab may use of the App (the App is the only implementation)."""

    session: LiveSession
    engine: Any
    measure_lock: threading.Lock  # at most one measurement, profile or sweep at any time
    probed: bool
    telemetry: Any  # tabs.telemetry.TelemetryFeed: the latest snapshot and the sampler
    runs: LiveRuns  # the live measurements (`runs.paused`: space)
    code_paths: list[Path]  # the user's code files (gpuplay FILE.py, config.toml)

    @property
    def spec(self) -> RunSpec | None: ...

    def start_measurement(self) -> None: ...

    def refresh_all(self) -> None: ...

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None: ...  # fmt: skip


class PlaygroundTab(TabPane):
    """One tab: `LABEL` on a wide screen, `SHORT` when the tab bar is narrow, `TAB_ID` for keys."""

    LABEL: ClassVar[str] = ""
    SHORT: ClassVar[str] = ""
    TAB_ID: ClassVar[str] = ""

    lazy = False  # its widgets mounted after the first frame (compose_main: the tabs not shown at start)
    ready = True  # its widgets are mounted: it can draw

    def __init__(self) -> None:
        super().__init__(self.LABEL, id=self.TAB_ID)

    def mount_after_first_frame(self) -> PlaygroundTab:
        self.lazy, self.ready = True, False
        return self

    async def mount_composed_widgets(self, widgets: list[Widget]) -> None:
        """A tab not on screen at start (`lazy`) mounts its widgets after the first frame, as
        Textual's `Lazy` does for hidden tab panes: mounting and styling the six hidden tabs' widgets
        cost ~80 ms before the first frame on the 2-core machine. They mount one tab at a
        time, with a pause between, so a key pressed meanwhile waits for one tab's mount, not six
        (~100 ms in one block); a tab shown before its turn goes first. Until then it draws
        nothing (`ready`); it draws when mounted if it is shown by then."""
        if not self.lazy:
            await super().mount_composed_widgets(widgets)
            return

        async def mount() -> None:
            await super(PlaygroundTab, self).mount_composed_widgets(widgets)
            self.ready = True
            self.redraw_if_shown()

        queue = _LAZY_MOUNTS.setdefault(self.app, deque())
        queue.append((self, mount))
        if len(queue) == 1:  # the first: the chain starts after the first frame
            self.call_after_refresh(_mount_next, self.app)

    @property
    def host(self) -> Host:
        return self.app  # type: ignore[return-value]  # the playground's App, the one Host

    @property
    def shown(self) -> bool:
        """Whether this tab is the one on screen (its TabbedContent's active pane)."""
        parent = self.parent
        return isinstance(parent, ContentSwitcher) and parent.current == self.id

    def refresh_view(self) -> None:
        """Draw from the session and the tab's own state. Never runs the planner or a measurement."""

    def routed(self, message: Message) -> None:
        """A message the App routes to every tab (RunPhase, RunProgress, RunFinished, ProbesDone)."""

    def redraw_if_shown(self) -> None:
        if self.shown and self.ready:
            self.refresh_view()


LAZY_MOUNT_GAP_S = 0.01
# Per app: the lazy tabs still to mount, in order, each with its mount.
_LAZY_MOUNTS: weakref.WeakKeyDictionary[Any, deque[tuple[PlaygroundTab, Callable[[], Awaitable[None]]]]] = (
    weakref.WeakKeyDictionary()
)


async def _mount_next(app: Any) -> None:
    """Mount one lazy tab (the one on screen, if it is waiting), then the next after a pause."""
    queue = _LAZY_MOUNTS.get(app)
    if not queue:
        return
    entry = next((e for e in queue if e[0].shown), queue[0])
    queue.remove(entry)
    tab, mount = entry
    if tab.is_attached:
        await mount()
    if queue:
        # The mount's frame painted first (the screen runs after-refresh callbacks once its dirty
        # widgets are drawn; a bare 10 ms timer fired before the next 60 fps frame with three
        # test workers on two cores), then a pause: keys pressed meanwhile (and their frames)
        # go before the next mount.
        app.call_after_refresh(app.set_timer, LAZY_MOUNT_GAP_S, partial(_mount_next, app))
    else:
        _LAZY_MOUNTS.pop(app, None)


def fit_labels(tabbed: TabbedContent, tabs: Iterable[PlaygroundTab], width: int) -> None:
    """Every tab's label on screen: the short labels when the full ones do not fit `width`."""
    tabs = list(tabs)
    if not width:
        return  # not laid out yet
    full = sum(len(t.LABEL) + 2 for t in tabs)  # a tab is its label and one column either side
    short = width < full
    for tab in tabs:
        label = tab.SHORT if short else tab.LABEL
        header = tabbed.get_tab(tab.TAB_ID)
        if str(header.label) != label:
            header.label = label
