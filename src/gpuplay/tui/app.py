"""The gpuplay playground. The App composes the tabs (tui/tabs/), owns the session and the engine,
routes the engine's messages to the tabs and handles the app-wide keys; each tab owns its own
state and workers. Thread workers run the core engine and only post messages back.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import threading
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.widgets import Footer, OptionList, TabbedContent
from textual.worker import Worker, WorkerState

from gpuplay.core.backends import all_backends
from gpuplay.core.config import export_dir as config_export_dir
from gpuplay.core.config import load_config
from gpuplay.core.engine import make_engine
from gpuplay.core.engine.protocol import SampleBatcher, adopt_probe, await_engine_probe, forget_engine_probe
from gpuplay.core.safetext import visible as shown_text
from gpuplay.core.scenarios import ScenarioSet, load_scenarios
from gpuplay.core.session import LIVE_BUDGET_S, LiveSession
from gpuplay.core.sessionlog import SessionLog
from gpuplay.core.spec import RunSpec
from gpuplay.core.system import cpu_count
from gpuplay.core.telemetry import RunTelemetry, Sampler, Snapshot, nvml_status
from gpuplay.tui import exports, viewmodels
from gpuplay.tui.commands import GpuplayCommands, keymap_problems, set_lever, with_ids
from gpuplay.tui.controls import CONTROLS, cycle, live_threads
from gpuplay.tui.layout import compose_main
from gpuplay.tui.messages import ProbesDone, RunFinished, RunPhase, RunProgress, TelemetryTick
from gpuplay.tui.tabs import CollectivesTab, PlaygroundTab, draw_telemetry, fit_labels
from gpuplay.tui.themes import register_themes
from gpuplay.tui.usercode_view import code_scenarios
from gpuplay.tui.widgets import ControlsPanel, HelpScreen


class GpuPlayApp(App[None]):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    TITLE = "gpuplay"
    SUB_TITLE = "the same array code, NumPy → PyTorch → CuPy, CPU → GPU"

    COMMANDS = App.COMMANDS | {GpuplayCommands}  # ctrl+p: scenarios, levers, tabs, exports; themes

    # Every binding has an id (commands.binding_id), so config.toml's [keymap] can remap it.
    BINDINGS = with_ids([
        Binding("b", "cycle('backend')", "backend"),
        Binding("d", "cycle('device')", "device"),
        Binding("t", "cycle('dtype')", "dtype"),
        Binding("a", "cycle('amp')", "AMP"),
        Binding("c", "cycle('compile')", "compile"),
        Binding("f", "cycle('tf32')", "TF32", show=False),
        Binding("g", "cycle('cuda_graphs')", "CUDA graphs", show=False),
        Binding("p", "cycle_preset", "preset", show=False),
        Binding("l", "cycle_limit", "step limit", show=False),
        Binding("space", "pause", "pause"),
        Binding("r", "rerun", "re-run", show=False),
        Binding("x", "reset", "reset session", show=False),
        Binding("e", "export", "export"),
        Binding("s", "save_svg", "screenshot", show=False),
        Binding("1", "tab('live')", "live", show=False),
        Binding("2", "tab('compare')", "compare", show=False),
        Binding("3", "tab('code')", "code", show=False),
        Binding("4", "tab('telemetry')", "telemetry", show=False),
        Binding("5", "tab('profile')", "profile", show=False),
        Binding("6", "tab('collectives')", "collectives", show=False),
        Binding("k", "collectives", "collectives sweep", show=False),
        Binding("7", "tab('sweep')", "sweep", show=False),
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
        cfg = load_config()
        self.keymap, keymap_problems_ = keymap_problems(cfg.keymap, self.BINDINGS)
        register_themes(self)  # the palette's theme switcher lists the projector themes too
        self.scenario_set: ScenarioSet = load_scenarios([*cfg.scenario_dirs, *(scenario_dirs or [])])
        self.code_paths, code_problems = code_scenarios(
            self.scenario_set, [*(code_files or []), *cfg.code_files]
        )
        self.config_problems = [*cfg.problems, *keymap_problems_, *code_problems]
        self.session = LiveSession(self.scenario_set, threads=live_threads(cpu_count()), preset=preset,
                                   budget_s=budget_s, autostart=autostart)  # fmt: skip
        self.autostart = autostart
        self.export_dir = export_dir or config_export_dir()
        self.cancel = threading.Event()
        self.paused = threading.Event()
        self.measure_lock = threading.Lock()  # at most one measurement (or profile, or sweep) at any time
        self.probed = False
        self.session_log = SessionLog()
        self.sample_interval = cfg.sample_interval  # while measuring; slower when idle
        self.sampler = Sampler(cfg.sample_interval, on_snapshot=self._post_snapshot) if telemetry else None
        self.nvml_line = ""
        self.latest: Snapshot | None = None
        self._scenario_timer: Any = None
        # Measurements run in an engine process: this process never imports torch or CuPy.
        self.engine = make_engine("engine", on_probe=self._post_probe)
        if self.sampler is not None:
            self.sampler.engine_pid = lambda: self.engine.pid
        if not self.engine.in_process:
            await_engine_probe()  # before anything asks a backend: never probe (import torch) here
        self.exit_signal: int | None = None

    # The configuration on screen (the session's); the palette and the lever keys set it.
    spec = property(lambda self: self.session.spec, lambda self, v: setattr(self.session, "spec", v))

    def compose(self) -> ComposeResult:
        yield from compose_main(self.scenario_set, self.code_paths)

    @property
    def main(self) -> Any:
        """The playground's own screen: queries must not land on the help screen above it."""
        return self.screen_stack[0] if self.screen_stack else self.screen

    def tab(self, tab_id: str) -> PlaygroundTab:
        """The tab with this id (live, compare, code, telemetry, profile, collectives, sweep)."""
        return self.main.query_one(f"#{tab_id}", PlaygroundTab)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every notification here carries outside text (a file's, a result's, an exception's):
        shown as text, never parsed as markup, control characters visible."""
        super().notify(
            shown_text(message),
            title=shown_text(title, one_line=True),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        self.main.query_one("#scenarios", OptionList).border_title = "scenarios"
        self._adapt_layout(self.size.width, self.size.height)
        for problem in self.config_problems:
            self.notify(problem, severity="warning")
        for err in self.scenario_set.errors:
            self.notify(str(err), title="scenario not loaded", severity="warning", timeout=8)
        if self.session.scenario is None:
            self.notify("no scenarios found", severity="error")
            return
        self.session.spec = self.session.make_spec()
        self.refresh_all()
        if self.sampler is not None:
            self.nvml_line = nvml_status()
            self.sampler.start()
        # SIGTERM and SIGHUP quit like `q`: the engine goes, the terminal is restored.
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, self._quit_on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (tests) or no signals on this platform
        # The engine imports torch and probes the devices in its own process; the first frame
        # does not wait for it, and the first measurement does.
        self.engine.start()

    def on_resize(self, event: Any) -> None:
        self._adapt_layout(event.size.width, event.size.height)
        self.refresh_controls(event.size.width)  # self.size is still the old size here

    def _adapt_layout(self, width: int, height: int) -> None:
        self.main.set_class(width < 150, "narrow")
        self.main.set_class(height < 32, "short")
        # Compact footer keys below 120 columns, and no palette hint below 100 (ctrl+p and the
        # help still open it): at 80 the full footer cuts off help and quit.
        for footer in self.main.query(Footer):
            footer.compact = width < 120
            if footer.show_command_palette != (width >= 100):
                footer.show_command_palette = width >= 100
                footer.refresh(recompose=True)  # not a recomposing reactive in Textual
        tabbed = self.main.query_one(TabbedContent)
        self.call_after_refresh(
            fit_labels, tabbed, self.main.query(PlaygroundTab)
        )  # once the bar has its width

    def on_unmount(self) -> None:
        self.cancel.set()
        self.paused.clear()
        self.engine.kill()  # nothing in it to save; a compile or a long step must not delay quitting
        if not self.engine.in_process:
            forget_engine_probe()
        if self.sampler is not None:
            self.sampler.stop()

    def _quit_on_signal(self, sig: int) -> None:
        self.exit_signal = sig
        self.engine.kill()
        self.exit(return_code=128 + sig)

    # -- the engine: plain calls in a worker that only post messages ---------------------------
    def _post_probe(self, data: dict[str, Any], final: bool) -> None:
        # Called from the engine client's reader thread: hand the answer to the UI thread.
        self.post_message(ProbesDone(final=final, data=data))

    @work(thread=True, group="measure", exit_on_error=False)
    def _measure(
        self,
        spec: RunSpec,
        run_id: int,
        role: str,
        cancel: threading.Event,
        pause: threading.Event,
        paired_with: RunSpec | None = None,
    ) -> None:
        with self.measure_lock:
            if cancel.is_set():
                return
            sink = SampleBatcher(lambda batch: self.post_message(RunProgress(run_id, batch)))
            telemetry = RunTelemetry(self.sampler) if self.sampler is not None else None
            result = self.engine.run(
                spec,
                on_sample=sink.add if role == "live" else None,
                cancel=cancel,
                pause=pause,
                on_phase=lambda ph, _d: self.post_message(RunPhase(run_id, ph)),
                telemetry=telemetry,
                paired_with=paired_with,
            )
            sink.flush()
        self.post_message(RunFinished(run_id, result, role))

    def _post_snapshot(self, snap: Snapshot) -> None:
        self.post_message(TelemetryTick(snap))

    def start_measurement(self) -> None:
        """Cancel whatever runs (it stops within one step) and measure the live spec."""
        if self.spec is None or not self.probed:
            return
        self.cancel.set()
        self.cancel = threading.Event()
        self.paused.clear()
        run_id = self.session.begin_run()
        self._measure(self.spec, run_id, "live", self.cancel, self.paused)
        self.refresh_all()

    # -- messages: the session first, then every tab ---------------------------------------------
    def route(self, message: Message) -> None:
        for tab in self.main.query(PlaygroundTab):
            tab.routed(message)

    def on_probes_done(self, msg: ProbesDone) -> None:
        if msg.data is not None and not self.engine.in_process:
            adopt_probe(msg.data)
        if msg.final or self.probed:  # the final answer, or a restarted engine's
            self.refresh_controls()
            return
        self.probed = True
        # torch and Textual leave ~10^6 long-lived objects; a full collection that scans
        # them all stalls the UI (and any Python-heavy step) for 100+ ms. Freezing them
        # once, after start-up, keeps later collections to what is new.
        gc.collect()
        gc.freeze()
        if self.autostart:
            self.start_measurement()
        else:
            self.session.phase = "idle"
            self.refresh_all()

    def on_run_phase(self, msg: RunPhase) -> None:
        if self.session.set_phase(msg.run_id, msg.phase):
            self.route(msg)

    def on_run_progress(self, msg: RunProgress) -> None:
        if self.session.add_samples(msg.run_id, msg.samples):
            self.route(msg)

    def on_run_finished(self, msg: RunFinished) -> None:
        r = msg.result
        self.route(msg)  # the Code tab reads the run's user-code error against the run on screen
        todo = self.session.finish(msg.run_id, r, msg.role)
        if todo.log and not self.session_log.append(r):
            self.notify(self.session_log.error or "session log not written", severity="warning")
        if not (msg.role == "baseline" and r.status in ("failed", "refused")):  # Live shows those
            for message, title, severity in todo.notify:
                self.notify(message, title=title, severity=severity, timeout=8)  # type: ignore[arg-type]
        if todo.start_baseline is not None:
            # The run on screen again, paired with its baseline: a speedup with an interval.
            self._measure(r.spec, msg.run_id, "baseline", self.cancel, self.paused, todo.start_baseline)
        if todo.current:
            self.refresh_all()

    def on_telemetry_tick(self, msg: TelemetryTick) -> None:
        self.latest = msg.snapshot
        pace = viewmodels.telemetry_pace(self.session, self.sample_interval)
        if self.sampler is not None:
            self.sampler.interval = pace.sample_s  # 1 Hz idle: sampling costs CPU too
        self.refresh_telemetry(pace.panel_s, pace.chart_s)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The one place unexpected worker errors land (the tabs' too): show them, keep running.
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            self.session.phase = "failed"
            self.notify(f"{type(err).__name__}: {err}", title="worker failed", severity="error", timeout=10)
            self.refresh_all()

    @on(OptionList.OptionHighlighted, "#scenarios")
    def _scenario_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        name = event.option.id
        if self.session.scenario is not None and name == self.session.scenario.name:
            return
        if self._scenario_timer is not None:
            self._scenario_timer.stop()
        # Debounced: arrowing through the list restarts once, where the cursor stops.
        self._scenario_timer = self.set_timer(0.25, lambda: self.choose_scenario(name))

    def choose_scenario_from_palette(self, name: str) -> None:
        """Move the list's highlight to `name`; the list's handler chooses it, as arrows do."""
        scenarios = self.main.query_one("#scenarios", OptionList)
        scenarios.highlighted = scenarios.get_option_index(name)

    def set_lever(self, field: str, value: Any) -> None:
        set_lever(self, field, value)

    def choose_scenario(self, name: str | None) -> None:
        if self.session.choose_scenario(name):
            self.start_measurement()

    # -- actions -----------------------------------------------------------------
    def action_cycle(self, field: str) -> None:
        if self.spec is None:
            return
        new, why = cycle(self.spec, field)
        if why:
            title = next((c.title for c in CONTROLS if c.field == field), "option")  # words, not field names
            self.notify(why, title=f"no other {title} available", severity="warning", timeout=8)
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
        if self.paused.is_set():
            self.paused.clear()
        else:
            self.paused.set()
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
        self.main.query_one(CollectivesTab).start()

    def action_help(self) -> None:
        rows = [
            (self.keymap.get(b.id or "", b.key).replace("question_mark", "?"), b.description)
            for b in self.BINDINGS
            if isinstance(b, Binding)
        ]
        rows.append(("↑ ↓", "choose a scenario (in the list)"))
        self.push_screen(HelpScreen(rows))

    def action_export(self) -> None:
        message, title, severity = exports.export_session(self.session.results, self.export_dir)
        self.notify(message, title=title, severity=severity)  # type: ignore[arg-type]

    def action_save_svg(self) -> None:
        message, title, severity = exports.save_svg(self, self.export_dir)
        self.notify(message, title=title, severity=severity)  # type: ignore[arg-type]

    # -- drawing: the controls, the tab on screen, the telemetry; hidden tabs draw when shown ----
    def refresh_all(self) -> None:
        self.refresh_controls()
        self.tab(self.main.query_one(TabbedContent).active).refresh_view()
        self.refresh_telemetry()

    def refresh_controls(self, width: int | None = None) -> None:
        if self.spec is not None:
            compact = self.main.has_class("narrow") and (width or self.size.width) < 110
            probes = tuple(b.availability(0).pending for b in all_backends())
            self.main.query_one(ControlsPanel).show(
                self.spec, self.session.preset, self.session.step_limit, self.paused.is_set(), compact, probes
            )

    def refresh_telemetry(self, panel_s: float = 0.0, chart_s: float = 0.0) -> None:
        """Redraw the telemetry on screen; a tick redraws only as often as its pace says."""
        if not self.main.has_class("narrow"):
            draw_telemetry(self.main.query_one("#side-telemetry"), panel_s, chart_s)
        telemetry = self.tab("telemetry")
        if telemetry.shown:
            draw_telemetry(telemetry, panel_s, chart_s)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
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
