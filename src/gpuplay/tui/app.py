"""The gpuplay playground. The App composes the tabs (tui/tabs/), owns the session and the engine,
routes the engine's messages to the tabs and handles the app-wide keys; each tab owns its own
state and workers. Thread workers run the core engine and only post messages back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widgets import TabbedContent
from textual.worker import Worker, WorkerState

from gpuplay.core.backends import all_backends
from gpuplay.core.engine import make_engine
from gpuplay.core.engine.protocol import adopt_probe, await_engine_probe, forget_engine_probe
from gpuplay.core.hw.system import cpu_count
from gpuplay.core.reports.sessionlog import SessionLog
from gpuplay.core.studies.session import LIVE_BUDGET_S, LiveSession
from gpuplay.tui import exports, tabs
from gpuplay.tui.commands import GpuplayCommands, help_rows, set_lever, with_ids
from gpuplay.tui.controls import CONTROLS, cycle, live_threads
from gpuplay.tui.layout import adapt_layout, compose_main
from gpuplay.tui.lever_keys import lever_bindings
from gpuplay.tui.messages import ProbesDone, RunFinished, RunPhase, RunProgress, TelemetryTick
from gpuplay.tui.runs import LiveRuns
from gpuplay.tui.sidebar import Sidebar
from gpuplay.tui.startup import load_startup
from gpuplay.tui.textapp import TextApp
from gpuplay.tui.themes import register_themes
from gpuplay.tui.widgets import ControlsPanel, HelpScreen


class GpuPlayApp(TextApp):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    TITLE = "gpuplay"
    SUB_TITLE = "the same array code, NumPy → PyTorch → CuPy, CPU → GPU"

    COMMANDS = App.COMMANDS | {GpuplayCommands}  # ctrl+p: scenarios, levers, tabs, exports; themes

    # Every binding has an id (commands.binding_id), so config.toml's [keymap] can remap it.
    BINDINGS = with_ids([
        *lever_bindings(),  # b d t a c f g i v m o n y: generated from core/catalogue/levers.py
        Binding("p", "cycle_preset", "preset", show=False),
        Binding("l", "cycle_limit", "step limit", show=False),
        Binding("space", "pause", "pause"),
        Binding("r", "rerun", "re-run", show=False),
        Binding("x", "reset", "reset session", show=False),
        Binding("e", "export", "export"),
        Binding("s", "save_svg", "screenshot", show=False),
        *tabs.tab_bindings(),  # 1–8
        Binding("k", "collectives", "collectives sweep", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ])  # fmt: skip

    def __init__(
        self,
        scenario_dirs: list[Path] | None = None,
        *,
        autostart: bool = True,
        telemetry: bool = True,
        export_dir: Path | None = None,
        preset: str = "quick",
        budget_s: float = LIVE_BUDGET_S,
        code_files: list[Path] | None = None,
    ) -> None:
        super().__init__()
        start = load_startup(scenario_dirs or [], code_files or [], self.BINDINGS, export_dir)
        self.keymap, self.scenario_set, self.code_paths = start.keymap, start.scenario_set, start.code_paths
        self.config_problems, self.export_dir = start.problems, start.export_dir
        register_themes(self)  # the palette's theme switcher lists the projector themes too
        self.session = LiveSession(self.scenario_set, threads=live_threads(cpu_count()), preset=preset,
                                   budget_s=budget_s, autostart=autostart)  # fmt: skip
        self.probed = False
        self.session_log = SessionLog()
        self.telemetry = tabs.TelemetryFeed(self, start.sample_interval, telemetry, lambda: self.engine.pid)
        # Measurements run in an engine process: this process never imports torch or CuPy. Its
        # probe answers come on the client's reader thread: handed to the UI thread as messages.
        self.engine = make_engine("engine", on_probe=self._post_probe)
        if not self.engine.in_process:
            await_engine_probe()  # before anything asks a backend: never probe (import torch) here
        self.runs = LiveRuns(self, self.engine, self.telemetry)
        self.measure_lock = self.runs.lock  # at most one measurement (or profile, or sweep) at any time

    # The configuration on screen (the session's); the palette and the lever keys set it.
    spec = property(lambda self: self.session.spec, lambda self, v: setattr(self.session, "spec", v))

    def compose(self) -> ComposeResult:
        # The size classes (narrow, short, …) before the widgets get their styles: set after, at
        # the first resize, they restyled every widget once more before the first frame.
        adapt_layout(self.screen, self.size.width, self.size.height)
        yield from compose_main(self.scenario_set)

    def tab(self, tab_id: str) -> tabs.PlaygroundTab:
        """The tab with this id (live, compare, code, telemetry, profile, collectives, sweep)."""
        return self.main.query_one(f"#{tab_id}", tabs.PlaygroundTab)

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        adapt_layout(self.main, self.size.width, self.size.height)
        for problem in self.config_problems:
            self.notify(problem, severity="warning")
        for err in self.scenario_set.errors:
            self.notify(str(err), title="scenario not loaded", severity="warning", timeout=8)
        # Two of the user's files of one name, both named. (A file replacing a shipped scenario
        # is said in the palette's entry for it: a folder may replace them all on purpose.)
        for warning in self.scenario_set.warnings:
            self.notify(warning, title="scenario name used twice", severity="warning", timeout=8)
        if self.session.scenario is None:
            self.notify("no scenarios found", severity="error")
            return
        self.session.spec = self.session.make_spec()
        self.refresh_all()
        # The sampler's thread and its imports (psutil, the NVML glue) after the first frame.
        self.call_after_refresh(self.telemetry.start)
        self.quit_on_signals()  # SIGTERM and SIGHUP quit like `q`: the engine goes first
        # The engine imports torch and probes the devices in its own process; the first frame
        # does not wait for it, and the first measurement does.
        try:
            self.engine.start()
        except RuntimeError as exc:  # EngineStartError: the interpreter gone or not executable
            from rich.markup import escape

            from gpuplay.core.storage.safetext import visible

            self.exit(return_code=1, message=escape(visible(exc)))

    def _post_probe(self, data: dict[str, Any], final: bool) -> None:
        self.post_message(ProbesDone(final, data))

    def on_resize(self, event: Any) -> None:
        adapt_layout(self.main, event.size.width, event.size.height)
        self.refresh_controls(event.size.width)  # self.size is still the old size here

    def on_unmount(self) -> None:
        self.runs.stop()
        # Nothing in it to save; a compile or a long step must not delay quitting, nor its teardown.
        self.engine.kill(wait=False)
        if not self.engine.in_process:
            forget_engine_probe()
        self.telemetry.stop()

    def before_signal_exit(self) -> None:
        self.engine.kill()

    def start_measurement(self) -> None:
        """Cancel whatever runs (it stops within one step) and measure the live spec."""
        if self.spec is None or not self.probed:
            return
        self.runs.cancel.set()  # what was measuring stops now; the new run waits for the paint
        run_id = self.session.begin_run()
        # The key's frame shows the choice (the controls); the tab on screen (the run's cleared
        # figures, a table, a chart) is drawn after that frame, and measuring starts after the
        # next: a key's repaint neither waits for a tab's view nor shares the two cores with a
        # measurement's start.
        self.refresh_controls()
        self.call_after_refresh(self._show_new_run, self.spec, run_id)

    def _show_new_run(self, spec: Any, run_id: int) -> None:
        if run_id == self.session.run_id:  # else a later key replaced this run: it draws its own
            self.refresh_all()
            self.call_after_refresh(self._start_run, spec, run_id)

    def _start_run(self, spec: Any, run_id: int) -> None:
        if run_id == self.session.run_id:  # a later key has already replaced this run
            self.runs.start(spec, run_id)

    # -- messages: the session first, then every tab ---------------------------------------------
    # These come from threads (the engine's runs, its probe, the telemetry sampler). Once the app
    # shuts down (`is_running` false: `q`, Ctrl+C, SIGTERM), Textual removes its screens and then
    # handles what is still queued, before on_unmount stops those threads: a message posted in
    # between has no screen to draw on (`self.main` raised ScreenStackError, printed as a traceback
    # after the terminal was restored). It is then dropped, except a result, which is still logged.
    def route(self, message: Message) -> None:
        for tab in self.main.query(tabs.PlaygroundTab):
            tab.routed(message)

    def on_probes_done(self, msg: ProbesDone) -> None:
        if not self.is_running:
            return
        if msg.data is not None and not self.engine.in_process:
            adopt_probe(msg.data)
        if msg.final or self.probed:  # the final answer, or a restarted engine's
            self.refresh_controls()
            return
        self.probed = True
        self.freeze_startup_objects()
        if self.session.autostart:
            self.start_measurement()
        else:
            self.session.phase = "idle"
            self.refresh_all()

    def on_run_phase(self, msg: RunPhase) -> None:
        if self.session.set_phase(msg.run_id, msg.phase) and self.is_running:
            self.route(msg)

    def on_run_progress(self, msg: RunProgress) -> None:
        if self.session.add_samples(msg.run_id, msg.samples) and self.is_running:
            self.route(msg)

    def on_run_finished(self, msg: RunFinished) -> None:
        r = msg.result
        if not self.is_running:  # quitting: nothing to draw on, but what was measured is logged
            if self.session.finish(msg.run_id, r, msg.role).log:
                self.session_log.append(r)
            return
        self.route(msg)  # the Code tab reads the run's user-code error against the run on screen
        todo = self.session.finish(msg.run_id, r, msg.role)
        if todo.log and not self.session_log.append(r):
            self.notify(self.session_log.error or "session log not written", severity="warning")
        if not (msg.role == "baseline" and r.status in ("failed", "refused")):  # Live shows those
            for message, title, severity in todo.notify:
                self.notify(message, title=title, severity=severity, timeout=8)  # type: ignore[arg-type]
        if todo.start_baseline is not None:
            self.runs.start_paired(r.spec, msg.run_id, todo.start_baseline)  # its speedup, with an interval
        if todo.current:
            self.refresh_all()

    def on_telemetry_tick(self, msg: TelemetryTick) -> None:
        if not self.is_running:
            return
        pace = self.telemetry.tick(msg.snapshot, self.session)
        tabs.draw_visible_telemetry(self.main, pace.panel_s, pace.chart_s)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The one place unexpected worker errors land (the tabs' too): show them, keep running.
        # While quitting, a worker that ends in error (its widgets removed under it) has no screen
        # to be shown on (see the messages above).
        if event.state == WorkerState.ERROR and self.is_running:
            err = event.worker.error
            self.session.phase = "failed"
            self.notify(f"{type(err).__name__}: {err}", title="worker failed", severity="error", timeout=10)
            self.refresh_all()

    def on_sidebar_scenario_chosen(self, msg: Sidebar.ScenarioChosen) -> None:
        self.choose_scenario(msg.name)

    def choose_scenario_from_palette(self, name: str) -> None:
        self.main.query_one(Sidebar).highlight(name)  # chosen as the arrows choose

    def set_lever(self, field: str, value: Any) -> None:
        set_lever(self, field, value)

    def choose_scenario(self, name: str | None) -> None:
        """Measure the scenario called `name`, unless it is the one on screen."""
        current = self.session.scenario
        if (current is None or name != current.name) and self.session.choose_scenario(name):
            self.start_measurement()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """On a short screen one notification at a time: a second one stacked under the first
        ran down over the controls (80x24); toasts sit over the scenario list only."""
        if self.main.has_class("short"):
            self.clear_notifications()
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # -- actions -----------------------------------------------------------------
    def action_cycle(self, field: str) -> None:
        if self.spec is None:
            return
        new, why = cycle(self.spec, field)
        if why:
            title = next((c.title for c in CONTROLS if c.field == field), "option")  # words, not field names
            self.notify(why, title=f"{title} cannot be changed here", severity="warning", timeout=8)
        if new != self.spec:
            self.spec = new
            self.start_measurement()
        self.refresh_controls()

    def action_cycle_preset(self) -> None:
        self.session.cycle_preset()
        self.start_measurement()

    def action_cycle_limit(self) -> None:
        self.session.cycle_limit()
        self.start_measurement()

    def action_pause(self) -> None:
        self.runs.toggle_pause()
        self.refresh_controls()

    def action_rerun(self) -> None:
        self.start_measurement()

    def action_reset(self) -> None:
        self.session.reset()
        self.notify("session cleared (the session log on disk keeps every measurement)")
        self.start_measurement()

    def action_tab(self, tab: str) -> None:
        self.main.query_one(TabbedContent).active = tab  # TabActivated refreshes the new view

    def action_collectives(self) -> None:
        self.action_tab("collectives")
        self.main.query_one(tabs.CollectivesTab).start()

    def action_help(self) -> None:
        # Built once and kept (installed): a screen pushed anew is composed and laid out twice (its
        # resize, its resume), ~70 ms on the 2-core machine; a kept one only repaints.
        # Its rows cannot change while the app runs: the keymap is set once, in on_mount.
        if not self.is_screen_installed("help"):
            self.install_screen(HelpScreen(help_rows(self.BINDINGS, self.keymap)), "help")
        self.push_screen("help")

    def unavailable_reasons(self) -> list[str]:
        """Every unavailable value's reason, whole, as the controls panel lists them (help screen)."""
        return list(getattr(self.main.query_one(ControlsPanel), "reasons", []))

    def action_export(self) -> None:
        self.notify(**exports.export_session(self.session.results, self.export_dir))

    def action_save_svg(self) -> None:
        self.notify(**exports.save_svg(self, self.export_dir))

    # -- drawing: the controls, the tab on screen, the telemetry; hidden tabs draw when shown ----
    def refresh_all(self) -> None:
        self.refresh_controls()
        tab = self.tab(self.main.query_one(TabbedContent).active)
        if tab.ready:  # else it draws itself once its widgets are mounted (tabs/base.py)
            tab.refresh_view()
        tabs.draw_visible_telemetry(self.main)

    def refresh_controls(self, width: int | None = None) -> None:
        if self.spec is not None:
            compact = self.main.has_class("narrow") and (width or self.size.width) < 110
            probes = tuple(b.availability(0).pending for b in all_backends())
            s, paused = self.session, self.runs.paused.is_set()
            self.main.query_one(ControlsPanel).show(
                self.spec, s.preset, s.step_limit, paused, compact, probes
            )

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        # Drawn in the frame that shows the tab. (Painting the tab as last drawn first and its
        # view after that frame was tried: the tab was then laid out and rendered twice when its
        # figures had changed, and the Compare key measured slower.)
        self.refresh_all()


def run_app(
    scenario_dirs: list[Path] | None = None, *, code_files: list[Path] | None = None, theme: str | None = None
) -> None:
    from gpuplay.tui.themes import apply_theme

    app = GpuPlayApp(scenario_dirs, code_files=code_files)
    apply_theme(app, theme)  # raises ValueError naming the known themes
    app.run()
    if app.exit_signal is not None:
        raise SystemExit(128 + app.exit_signal)
    if app.return_code:  # a crash: Textual printed the traceback; the shell must see a failure
        raise SystemExit(app.return_code)
