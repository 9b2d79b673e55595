"""The Collectives tab: a `gpuplay collectives` sweep in a child process, bus bandwidth drawn.

The tab owns the sweep: its arguments, the child process while it runs (under the measurement
lock: ranks on every core beside a live run would perturb both), and the JSON it printed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.reactive import reactive

from gpuplay.collectives.cores import oversubscription
from gpuplay.core.process.lifeline import spawn
from gpuplay.tui.collectives_view import CollectivesView, status_line
from gpuplay.tui.tabs.base import PlaygroundTab

DEFAULT_ARGS = ("--nproc", "2", "--op", "all_reduce,all_gather,broadcast", "--sizes", "1K:16M")


class CollectivesTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Collectives", "Coll", "collectives"

    running: reactive[bool] = reactive(False, init=False)
    doc: reactive[dict[str, Any] | None] = reactive(None, init=False)  # the last sweep's JSON
    error: reactive[str] = reactive("", init=False)  # why the last sweep failed

    def __init__(self) -> None:
        super().__init__()
        self.args = list(DEFAULT_ARGS)  # the `gpuplay collectives` arguments (tests shorten them)
        self._proc: subprocess.Popen[str] | None = None  # the child process while it runs

    def compose(self) -> ComposeResult:
        yield CollectivesView(id="collectives-view")

    def watch_running(self) -> None:
        if self.ready:
            self.refresh_view()

    def watch_doc(self) -> None:
        if self.ready:
            self.refresh_view()

    def watch_error(self) -> None:
        if self.ready:
            self.refresh_view()

    def on_unmount(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()  # the launcher stops its ranks (and they die with it regardless)

    def warning(self) -> str:
        """Whether the sweep's ranks (gloo on this machine's cores) oversubscribe them."""
        args = self.args
        nproc = int(args[args.index("--nproc") + 1]) if "--nproc" in args else 2
        threads = int(args[args.index("--threads") + 1]) if "--threads" in args else None
        return oversubscription(nproc, threads, "gloo")

    def refresh_view(self) -> None:
        from gpuplay.collectives.report import series

        doc = self.doc
        title = "bus bandwidth against message size"
        if doc:
            title += f" · {doc.get('backend')}, {doc.get('world_size')} ranks"
        status = status_line(doc, self.running, self.error)
        if self.warning():  # stays above the chart, not only in a passing toast
            status = f"[yellow]⚠ {escape(self.warning())}[/]\n{status}"
        self.query_one(CollectivesView).show(status, series(doc) if doc else {}, title)

    def start(self) -> None:
        """Start a sweep (key k), unless one runs."""
        if self.running:
            self.host.notify("a collectives sweep is already running", severity="warning")
            return
        self.error = ""
        self.running = True
        if self.warning():
            self.host.notify(self.warning(), title="more ranks than cores", severity="warning")
        self._sweep(list(self.args))

    @work(thread=True, group="collectives", exit_on_error=False)
    def _sweep(self, args: list[str]) -> None:
        cmd = [sys.executable, "-m", "gpuplay", "collectives", *args, "--format", "json"]
        doc, error = None, ""
        try:
            with self.host.measure_lock:
                # spawn: the child dies with the app, even by SIGKILL (core/process/lifeline.py)
                proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)  # fmt: skip
                self._proc = proc
                out, err = proc.communicate()
            if proc.returncode == 0:
                doc = json.loads(out)
            else:
                lines = [x for x in err.strip().splitlines() if x.strip()]
                error = lines[-1] if lines else f"exit code {proc.returncode}"
        except (OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.app.call_from_thread(self._swept, doc, error)

    def _swept(self, doc: dict[str, Any] | None, error: str) -> None:
        self._proc = None
        self.doc, self.error = doc or self.doc, error
        self.running = False
        if error:
            self.host.notify(error, title="collectives failed", severity="error", timeout=8)
