"""The Code tab: the step the configuration runs, per backend; for a user's file, the file itself,
what went wrong in it, and a watcher that re-checks and re-runs it on every save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.message import Message

from gpuplay.core.backends import all_backends
from gpuplay.tui import viewmodels
from gpuplay.tui.messages import RunFinished
from gpuplay.tui.sidebar import Sidebar
from gpuplay.tui.tabs.base import PlaygroundTab
from gpuplay.tui.usercode_view import (
    adopt_code_file,
    code_ref,
    is_code_ref,
    listed,
    recheck,
    ref_path,
    show_user_code,
    watch_code_files,
)
from gpuplay.tui.widgets import CodeView


class CodeTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Code", "Code", "code"

    def __init__(self) -> None:
        super().__init__()
        self.code_errors: dict[str, tuple[str, str]] = {}  # workload name -> (message, detail)
        self._watch: Any = None

    def compose(self) -> ComposeResult:
        yield CodeView()

    def on_mount(self) -> None:
        if self.host.code_paths:  # the user's files, watched while the app runs
            self._watch = watch_code_files(self.app, self.host.code_paths, self.code_saved)

    def on_unmount(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def routed(self, message: Message) -> None:
        if not isinstance(message, RunFinished):
            return
        r = message.result
        if is_code_ref(r.spec.workload) and message.run_id == self.host.session.run_id:
            if r.failure == "user-code":
                self.code_errors[r.spec.workload] = (r.message, r.detail)
            elif r.status == "ok":
                self.code_errors.pop(r.spec.workload, None)

    def code_saved(self, path: Path) -> None:
        """A code file was saved: check it without running it, then re-run if it is the one shown."""
        host = self.host
        name = code_ref(path)
        _source, message, detail = recheck(path)
        if not message and not listed(host.session.scenario_set, path):
            # It did not load at start-up; now it does: it joins the list, first like the others.
            sc = adopt_code_file(host.session.scenario_set, path)
            if sc is not None:
                self.app.query_one(Sidebar).reload()
                host.notify(f"{path.name} loaded: it is now in the scenario list", title="your code")
                return
        host.session.forget_workload(name)
        if message:
            self.code_errors[name] = (message, detail)
            host.notify(message, title=f"{path.name} cannot run", severity="error", timeout=8)
        else:
            self.code_errors.pop(name, None)
        if host.spec is not None and host.spec.workload == name:
            if not message:
                host.start_measurement()
            host.refresh_all()

    def refresh_view(self) -> None:
        spec = self.host.spec
        if spec is None:
            return
        titles = {b.name: b.title for b in all_backends()}
        if is_code_ref(spec.workload):
            path = ref_path(spec.workload)
            source, message, detail = recheck(path)
            message, detail = (message, detail) if message else self.code_errors.get(spec.workload, ("", ""))
            title = titles.get(spec.backend, spec.backend)
            show_user_code(self.query_one(CodeView), path, source, title, message, detail)
            return
        self.query_one(CodeView).show(*viewmodels.code_panes(spec, titles))
