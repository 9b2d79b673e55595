"""The Tune tab: the levers checklist climbed live on the scenario or code file chosen in the list.

Enter starts the ladder (core/studies/tune.py) and stops it; each rung appears as it is decided,
one change on top of the best configuration so far, timed in interleaved pairs against it, with a
bar chart of the cumulative speedup. It runs in a thread worker under the app's measurement lock,
in the app's engine (the live run is stopped first: a measurement beside it would perturb both);
a stop keeps the finished rungs, as every cancelled measurement keeps what it measured.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpuplay.core.storage.safetext import visible
from gpuplay.tui.tabs.base import PlaygroundTab

HINT = "enter: climb the levers ladder on the chosen scenario or code file (enter again stops it)"
BUDGET_S = 60.0  # the whole ladder, compile time included: a minute of the playground (TuneTab.budget_s)
BAR_WIDTH = 30


def chart(ladder: Any, width: int = BAR_WIDTH) -> Text:
    """Cumulative speedup after each measured rung, as bars on a log scale (1× is no bar)."""
    out = Text()
    rows = [(r.name, r.cumulative, r.kept) for r in ladder.rungs if r.cumulative is not None]
    if not rows:
        return out
    top = max(max(c for _, c, _ in rows), 2.0)
    out.append("cumulative speedup over the baseline\n", style="bold")
    for name, c, kept in rows:
        n = 0 if c <= 1 else max(1, round(width * math.log(c) / math.log(top)))
        out.append(f"{name[:14]:<14} ")
        out.append("█" * n, style="green" if kept else "dim")
        out.append(f" {c:.3g}×" + ("" if kept else " (dropped)") + "\n", style="" if kept else "dim")
    return out


NARROW = 70  # below this many columns the tab shows rung, speedup and outcome only


def ladder_table(ladder: Any, width: int = 120) -> Table:
    """The ladder narrow enough for the tab: the configuration and the error are in the JSON,
    the CLI's table and the status line; here each rung's outcome says why, in words."""
    from gpuplay.core.studies.tune import table_rows

    narrow = 0 < width < NARROW
    table = Table(expand=True, pad_edge=False, show_edge=False, box=box.SIMPLE_HEAD)
    figures = ("rung", "speedup") if narrow else ("rung", "median", "speedup [95%]", "cumul.")
    for c in figures:
        table.add_column(c, no_wrap=True, justify="left" if c == "rung" else "right")
    table.add_column("outcome", ratio=1, overflow="fold")
    for row in table_rows(ladder):
        rung, _config, median, speed, cumul, err, outcome = row
        if outcome.startswith("kept") and err != "—":
            outcome = f"kept · error {err}"
        cells = (rung, speed.split(" [")[0], outcome) if narrow else (rung, median, speed, cumul, outcome)
        table.add_row(*(Text(visible(c)) for c in cells))
    return table


class TuneView(VerticalScroll):
    """The ladder, its verdict and chart; focused when shown, so enter and the scroll keys (↑ ↓,
    PageUp/PageDown, Home/End: a ladder is longer than a short screen) act on it."""

    DEFAULT_CSS = """
    TuneView { height: 1fr; }
    #tune-status { height: auto; padding: 0 1; }
    #tune-table { height: auto; padding: 0 1; }
    #tune-chart { height: auto; padding: 1 1 0 1; }
    """
    BINDINGS = [Binding("enter", "start_stop", "start/stop tune")]

    def on_resize(self) -> None:
        tab = self.parent
        if isinstance(tab, TuneTab):
            tab.redraw_if_shown()

    def compose(self) -> ComposeResult:
        yield Static(HINT, id="tune-status")
        yield Static("", id="tune-table")
        yield Static("", id="tune-chart")

    def on_show(self) -> None:
        self.focus()  # enter works as soon as the tab is shown

    def action_start_stop(self) -> None:
        tab = self.parent
        if isinstance(tab, TuneTab):
            tab.start_stop()


class TuneTab(PlaygroundTab):
    LABEL, SHORT, TAB_ID = "Tune", "Tune", "tune"

    def __init__(self) -> None:
        super().__init__()
        self.ladder: Any = None
        self.running = False
        self.status = HINT
        self.cancel = threading.Event()
        self.budget_s = BUDGET_S

    def compose(self) -> ComposeResult:
        yield TuneView(id="tune-view")

    def refresh_view(self) -> None:
        view = self.query_one(TuneView)
        status = self.status
        if self.ladder is not None and self.ladder.winner is not None:
            from gpuplay.core.studies.tune import config_label

            status += f"\nbest so far: {config_label(self.ladder.winner)}"
        view.query_one("#tune-status", Static).update(Text(visible(status)))
        if self.ladder is not None:
            view.query_one("#tune-table", Static).update(ladder_table(self.ladder, view.size.width))
            view.query_one("#tune-chart", Static).update(chart(self.ladder))

    def start_stop(self) -> None:
        if self.running:
            self.cancel.set()
            self.status = "stopping: the finished rungs are kept …"
            self.redraw_if_shown()
            return
        host = self.host
        sc = host.session.scenario
        if sc is None or not host.probed:
            host.notify("the backends are still being probed; try again in a moment", severity="warning")
            return
        self.cancel = threading.Event()
        self.running = True
        self.status = f"planning the ladder for {visible(sc.name)} …"
        self.redraw_if_shown()
        host.runs.stop()  # the live run stops within a step; the ladder takes the engine next
        self.run_worker(self._climb, thread=True, group="tune", exit_on_error=False)

    def _climb(self) -> None:
        from gpuplay.core.catalogue.scenarios import spec_for
        from gpuplay.core.studies import tune

        host, call = self.host, self.app.call_from_thread
        sc, preset = host.session.scenario, host.session.preset
        if sc is None:
            call(self._ended, "no scenario chosen")
            return
        try:
            spec, _ = spec_for(sc, preset if preset in sc.presets else None, {})
            live = host.spec
            device = live.device if live is not None and live.device != "cpu" else tune.best_device(0)
            ladder = tune.plan_ladder(spec, device, sc.name, self.budget_s)
        except Exception as exc:  # a user's file, a scenario's parameters: said, never a traceback
            call(self._ended, f"cannot plan the ladder: {type(exc).__name__}: {exc}")
            return
        self.ladder = ladder
        call(self._update, f"{ladder.budget_line()} · order fixed: {tune.ORDER}")

        def on_start(i: int, rung: Any) -> None:
            call(self._update, f"measuring {rung.name}: {rung.configuration} against the best so far …")

        def on_rung(i: int, rung: Any) -> None:
            log = getattr(host, "session_log", None)  # the App's: every finished measurement is logged
            if log is not None and rung.result is not None and rung.result.usable:
                log.append(rung.result)
            call(self._update, None)

        with host.measure_lock:
            tune.run_ladder(
                ladder,
                host.engine.run,
                cancel=self.cancel,
                on_rung=on_rung,
                on_start=on_start,
                profile=lambda s: host.engine.profile(s, steps=5),
            )
        call(self._ended, ladder.verdict)

    def _update(self, status: str | None) -> None:
        if status is not None:
            self.status = status
        self.redraw_if_shown()

    def _ended(self, status: str) -> None:
        self.running = False
        self.status = status + "  ·  enter: climb again"
        self.redraw_if_shown()
