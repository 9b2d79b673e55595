"""The Profile tab: torch.profiler over a few steps of the configuration on screen.

The tab owns its profiles and the worker that asks the engine for one: when it is shown and
the configuration has none, it asks once the engine is idle, under the measurement lock (a
profile beside a measurement would perturb both).
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.reactive import reactive

from gpuplay.core.spec import RunSpec
from gpuplay.tui.profile_view import ProfileView
from gpuplay.tui.tabs.base import PlaygroundTab

# The engine is free for a profile after any ending: a refused or cancelled run too (waiting for
# "done" there left the tab on "No profile yet…" forever; the profile then says the refusal).
IDLE_PHASES = ("done", "idle", "failed", "refused", "cancelled")


class ProfileTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Profile", "Prof", "profile"

    # The profile on screen (None: none yet). Set it to draw it.
    profile: reactive[dict[str, Any] | None] = reactive(None, always_update=True, init=False)

    def __init__(self) -> None:
        super().__init__()
        self.profiles: dict[RunSpec, dict[str, Any] | None] = {}  # None: asked for, not back yet

    def compose(self) -> ComposeResult:
        yield ProfileView(id="profile-view")

    def watch_profile(self, profile: dict[str, Any] | None) -> None:
        if self.ready:
            self.query_one(ProfileView).show(profile)

    def refresh_view(self) -> None:
        """Show the current configuration's profile; ask the engine for one if there is none."""
        host = self.host
        spec = host.spec
        if spec is None:
            return
        self.profile = self.profiles.get(spec)
        if spec not in self.profiles and host.probed and host.session.phase in IDLE_PHASES:
            self.profiles[spec] = None  # asked for
            self._profile(spec)

    @work(thread=True, group="profile", exit_on_error=False)
    def _profile(self, spec: RunSpec) -> None:
        host = self.host
        with host.measure_lock:  # never beside a measurement: it would perturb both
            data = host.engine.profile(spec, steps=5)
        self.app.call_from_thread(self._profiled, spec, data)

    def _profiled(self, spec: RunSpec, data: dict[str, Any]) -> None:
        self.profiles[spec] = data
        if self.shown and spec == self.host.spec:
            self.profile = data
