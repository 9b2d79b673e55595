"""The gpuplay playground. The app owns every piece of state and reacts to messages;
thread workers run the core engine and only post messages back.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import gc
import signal
import threading
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.widgets import Footer, OptionList, TabbedContent
from textual.worker import Worker, WorkerState

from gpuplay.collectives.cores import oversubscription
from gpuplay.core.atomicfile import write_atomic
from gpuplay.core.backends import all_backends
from gpuplay.core.compare import attach_baselines, baseline_spec
from gpuplay.core.config import export_dir as config_export_dir
from gpuplay.core.config import load_config
from gpuplay.core.engine import make_engine
from gpuplay.core.engine.protocol import SampleBatcher, adopt_probe, await_engine_probe, forget_engine_probe
from gpuplay.core.result import RunResult
from gpuplay.core.safetext import visible as shown_text
from gpuplay.core.scenarios import ScenarioSet, load_scenarios, scenario_for
from gpuplay.core.session import LIVE_BUDGET_S, LiveSession
from gpuplay.core.sessionlog import SessionLog
from gpuplay.core.spec import RunSpec
from gpuplay.core.system import cpu_count
from gpuplay.core.telemetry import RunTelemetry, Sampler, Snapshot, nvml_status
from gpuplay.core.workloads.usercode import UserCodeError, code_ref, is_code_ref, ref_path
from gpuplay.tui import viewmodels
from gpuplay.tui.collectives_view import CollectivesView, status_line
from gpuplay.tui.commands import GpuplayCommands, keymap_problems, set_lever, with_ids
from gpuplay.tui.controls import CONTROLS, cycle, live_threads
from gpuplay.tui.layout import compose_main
from gpuplay.tui.lever_keys import lever_bindings
from gpuplay.tui.messages import ProbesDone, RunFinished, RunPhase, RunProgress, TelemetryTick
from gpuplay.tui.profile_view import ProfileView
from gpuplay.tui.roofline import RooflineChart
from gpuplay.tui.sweep_view import SweepView
from gpuplay.tui.themes import register_themes
from gpuplay.tui.usercode_view import recheck, show_user_code, watch_code_files
from gpuplay.tui.widgets import (
    ClaimLine,
    CodeView,
    CompareView,
    ControlsPanel,
    HelpScreen,
    SpeedupDigits,
    StatsPanel,
    StepChart,
    TelemetryChart,
    TelemetryPanel,
)


class GpuPlayApp(App[None]):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    TITLE = "gpuplay"
    SUB_TITLE = "the same array code, NumPy → PyTorch → CuPy, CPU → GPU"

    COMMANDS = App.COMMANDS | {GpuplayCommands}  # ctrl+p: scenarios, levers, tabs, exports; themes

    # Every binding has an id (commands.binding_id), so config.toml's [keymap] can remap it.
    BINDINGS = with_ids([
        *lever_bindings(),  # b d t a c f g v m o n: generated from core/levers.py
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
        self.config_problems = [*cfg.problems, *keymap_problems_]
        register_themes(self)  # the palette's theme switcher lists the projector themes too
        self.scenario_set: ScenarioSet = load_scenarios([*cfg.scenario_dirs, *(scenario_dirs or [])])
        self.code_paths, code_problems = _code_scenarios(
            self.scenario_set, [*(code_files or []), *cfg.code_files]
        )
        self.config_problems = [*self.config_problems, *code_problems]
        self.code_errors: dict[str, tuple[str, str]] = {}  # workload name -> (message, detail)
        self.baseline_problems: dict[RunSpec, str] = {}  # baseline spec -> why it could not run
        self.profiles: dict[RunSpec, dict[str, Any] | None] = {}  # None: asked for, not back yet
        # The collectives sweep: a `gpuplay collectives` child process and the JSON it printed.
        self.collectives_args = [
            "--nproc",
            "2",
            "--op",
            "all_reduce,all_gather,broadcast",
            "--sizes",
            "1K:16M",
        ]
        self.collectives_doc: dict[str, Any] | None = None
        self.collectives_error = ""
        self.collectives_running = False
        self._collectives_proc: Any = None  # the child process while it runs
        self._code_watch: Any = None
        self.session = LiveSession(self.scenario_set, threads=live_threads(cpu_count()), preset=preset,
                                   budget_s=budget_s, autostart=autostart)  # fmt: skip
        self.autostart = autostart
        self.export_dir = export_dir or config_export_dir()
        self.cancel = threading.Event()
        self.paused = threading.Event()
        self.measure_lock = threading.Lock()  # at most one measurement at any time
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

    # The session's state, read through the app by tests, benchmarks and widgets.
    spec = property(lambda self: self.session.spec, lambda self, v: setattr(self.session, "spec", v))
    scenario = property(lambda self: self.session.scenario)
    live_result = property(lambda self: self.session.live_result)
    results = property(lambda self: self.session.results)
    baselines = property(lambda self: self.session.baselines)
    samples = property(lambda self: self.session.samples)
    phase = property(lambda self: self.session.phase)
    baseline_running = property(lambda self: self.session.baseline_running)
    preset = property(lambda self: self.session.preset)
    step_limit = property(lambda self: self.session.step_limit)
    budget_s = property(
        lambda self: self.session.budget_s, lambda self, v: setattr(self.session, "budget_s", v)
    )

    # -- layout ---------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield from compose_main(self.scenario_set)

    @property
    def main(self) -> Any:
        """The playground's own screen: queries must not land on the help screen above it."""
        return self.screen_stack[0] if self.screen_stack else self.screen

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
        if self.scenario is None:
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
        if self.code_paths:
            self._code_watch = watch_code_files(self, self.code_paths, self.on_code_saved)

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

    def on_unmount(self) -> None:
        self.cancel.set()
        self.paused.clear()
        self.engine.kill()  # nothing in it to save; a compile or a long step must not delay quitting
        proc = self._collectives_proc
        if proc is not None and proc.poll() is None:
            proc.terminate()  # the launcher stops its ranks (and they die with it regardless)
        if self._code_watch is not None:
            self._code_watch.stop()
        if not self.engine.in_process:
            forget_engine_probe()
        if self.sampler is not None:
            self.sampler.stop()

    def on_code_saved(self, path: Path) -> None:
        """A code file was saved: check it without running it, then re-run if it is the one shown."""
        name = code_ref(path)
        source, message, detail = recheck(path)
        self.session.forget_workload(name)
        if message:
            self.code_errors[name] = (message, detail)
            self.notify(message, title=f"{path.name} cannot run", severity="error", timeout=8)
        else:
            self.code_errors.pop(name, None)
        if self.spec is not None and self.spec.workload == name:
            if not message:
                self.start_measurement()
            self.refresh_all()

    def _quit_on_signal(self, sig: int) -> None:
        self.exit_signal = sig
        self.engine.kill()
        self.exit(return_code=128 + sig)

    # -- workers: plain engine calls that only post messages ---------------------------
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

    # -- starting and stopping measurements ------------------------------------------------
    def _make_spec(self, base: RunSpec | None = None) -> RunSpec:
        return self.session.make_spec(base)

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

    def baseline_for(self, spec: RunSpec) -> RunResult | None:
        return self.session.baseline_for(spec)

    # -- messages ----------------------------------------------------------------
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
        if (
            self.session.set_phase(msg.run_id, msg.phase)
            and self.main.query_one(TabbedContent).active == "live"
        ):
            self.refresh_stats()

    def on_run_progress(self, msg: RunProgress) -> None:
        if (
            self.session.add_samples(msg.run_id, msg.samples)
            and self.main.query_one(TabbedContent).active == "live"
        ):
            self.refresh_live()

    def on_run_finished(self, msg: RunFinished) -> None:
        r = msg.result
        if is_code_ref(r.spec.workload) and msg.run_id == self.session.run_id:
            if r.failure == "user-code":
                self.code_errors[r.spec.workload] = (r.message, r.detail)
            elif r.status == "ok":
                self.code_errors.pop(r.spec.workload, None)
        todo = self.session.finish(msg.run_id, r, msg.role)
        if todo.log and not self.session_log.append(msg.result):
            self.notify(self.session_log.error or "session log not written", severity="warning")
        if msg.role == "baseline" and r.status in ("failed", "refused"):
            # Shown where the speedup would be, for as long as it applies (not a passing toast).
            self.baseline_problems[r.spec] = r.message
        else:
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
        self.refresh_telemetry(pace)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The one place unexpected worker errors land: show them, keep the app running.
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            self.session.phase = "failed"
            self.notify(f"{type(err).__name__}: {err}", title="worker failed", severity="error", timeout=10)
            self.refresh_stats()

    @on(OptionList.OptionHighlighted, "#scenarios")
    def _scenario_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        name = event.option.id
        if self.scenario is not None and name == self.scenario.name:
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

    def action_help(self) -> None:
        rows = [
            (self.keymap.get(b.id or "", b.key).replace("question_mark", "?"), b.description)
            for b in self.BINDINGS
            if isinstance(b, Binding)
        ]
        rows.append(("↑ ↓", "choose a scenario (in the list)"))
        self.push_screen(HelpScreen(rows))

    def action_export(self) -> None:
        if not self.results:
            self.notify("nothing measured yet to export", severity="warning")
            return
        from gpuplay.core import report

        rows = attach_baselines(self.results)
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        written = []
        try:
            for ext, text in (
                ("json", report.to_json(rows, source="gpuplay playground")),
                ("csv", report.to_csv(rows)),
                ("md", report.to_markdown(rows, "gpuplay session")),
            ):
                path = self.export_dir / f"gpuplay-session-{stamp}.{ext}"
                write_atomic(path, text)
                written.append(path.name)
        except OSError as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return
        self.notify(f"wrote {', '.join(written)} in {self.export_dir}", title="exported")

    def action_save_svg(self) -> None:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(f"gpuplay-{stamp}.svg", str(self.export_dir))
        except OSError as exc:
            self.notify(f"screenshot failed: {exc}", severity="error")
            return
        self.notify(f"saved {path}", title="screenshot")

    # -- drawing -----------------------------------------------------------------
    def refresh_all(self) -> None:
        """Redraw the controls and whatever view is visible; hidden views redraw when shown."""
        self.refresh_controls()
        active = self.main.query_one(TabbedContent).active
        if active == "live":
            self.refresh_live()
        elif active == "compare":
            self.refresh_compare()
        elif active == "code":
            self.refresh_code()
        elif active == "profile":
            self.refresh_profile()
        elif active == "collectives":
            self.refresh_collectives()
        elif active == "sweep":
            self.refresh_sweep()
        self.refresh_telemetry()

    def refresh_controls(self, width: int | None = None) -> None:
        if self.spec is not None:
            compact = self.main.has_class("narrow") and (width or self.size.width) < 110
            probes = tuple(b.availability(0).pending for b in all_backends())
            self.main.query_one(ControlsPanel).show(
                self.spec, self.preset, self.step_limit, self.paused.is_set(), compact, probes
            )

    def timed_summary(self) -> Any:
        return self.session.timed_summary()

    def refresh_stats(self) -> None:
        phase = viewmodels.phase_line(self.session, self.probed, self.paused.is_set())
        self.main.query_one(StatsPanel).show(
            self.spec, self.timed_summary(), phase, viewmodels.stats_info(self.session)
        )

    def refresh_live(self) -> None:
        self.refresh_stats()
        summary = self.timed_summary()
        big = viewmodels.speedup_view(self.session, self._baseline_problem())
        self.main.query_one(SpeedupDigits).show(big.speedup, big.note, big.marker, big.reason, big.short)
        title = viewmodels.chart_title(self.session)
        self.main.query_one(StepChart).show(self.samples, summary.median if summary else None, title)
        self.main.query_one(ClaimLine).show(self.scenario)

    def _baseline_problem(self) -> str:
        """Why the speedup of the configuration on screen could not be measured, if it could not.

        A paired job's result carries the configuration's spec; a baseline run alone, its own."""
        if self.spec is None:
            return ""
        if self.spec in self.baseline_problems:
            return self.baseline_problems[self.spec]
        try:
            return self.baseline_problems.get(baseline_spec(self.spec), "")
        except (KeyError, ValueError):
            return ""

    def refresh_compare(self) -> None:
        rows = attach_baselines(self.results)
        self.main.query_one(CompareView).show(rows, viewmodels.compare_focus(self.spec))
        self.main.query_one(RooflineChart).show(rows)

    def refresh_collectives(self) -> None:
        from gpuplay.collectives.report import series

        doc = self.collectives_doc
        running = self.collectives_running
        title = "bus bandwidth against message size"
        if doc:
            title += f" · {doc.get('backend')}, {doc.get('world_size')} ranks"
        status = status_line(doc, running, self.collectives_error)
        if self.collectives_warning():  # stays above the chart, not only in a passing toast
            status = f"[yellow]⚠ {escape(self.collectives_warning())}[/]\n{status}"
        self.main.query_one(CollectivesView).show(status, series(doc) if doc else {}, title)

    def collectives_warning(self) -> str:
        """Whether the sweep's ranks (gloo on this machine's cores) oversubscribe them."""
        args = self.collectives_args
        nproc = int(args[args.index("--nproc") + 1]) if "--nproc" in args else 2
        threads = int(args[args.index("--threads") + 1]) if "--threads" in args else None
        return oversubscription(nproc, threads, "gloo")

    def refresh_sweep(self) -> None:
        view = self.main.query_one(SweepView)
        view.follow(self.scenario, self.preset)  # the scenario chosen in the list, until a sweep starts
        view.refresh_view()

    def action_collectives(self) -> None:
        if self.collectives_running:
            self.notify("a collectives sweep is already running", severity="warning")
            return
        self.collectives_error = ""
        self.collectives_running = True
        if self.collectives_warning():
            self.notify(self.collectives_warning(), title="more ranks than cores", severity="warning")
        self.main.query_one(TabbedContent).active = "collectives"
        self._sweep(list(self.collectives_args))
        self.refresh_collectives()

    @work(thread=True, group="collectives", exit_on_error=False)
    def _sweep(self, args: list[str]) -> None:
        import json
        import subprocess
        import sys

        cmd = [sys.executable, "-m", "gpuplay", "collectives", *args, "--format", "json"]
        doc, error = None, ""
        try:
            # The measurement lock: ranks on every core beside a live run would perturb both.
            with self.measure_lock:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)  # fmt: skip
                self._collectives_proc = proc
                out, err = proc.communicate()
            if proc.returncode == 0:
                doc = json.loads(out)
            else:
                lines = [x for x in err.strip().splitlines() if x.strip()]
                error = lines[-1] if lines else f"exit code {proc.returncode}"
        except (OSError, ValueError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.call_from_thread(self._swept, doc, error)

    def _swept(self, doc: dict[str, Any] | None, error: str) -> None:
        self.collectives_running, self._collectives_proc = False, None
        self.collectives_doc, self.collectives_error = doc or self.collectives_doc, error
        if error:
            self.notify(error, title="collectives failed", severity="error", timeout=8)
        self.refresh_collectives()

    def refresh_profile(self) -> None:
        """Show the current configuration's profile; ask the engine for one if there is none."""
        view = self.main.query_one(ProfileView)
        if self.spec is None:
            return
        if self.profiles.get(self.spec) is not None:
            view.show(self.profiles[self.spec])
            return
        view.show(None)
        if (
            self.probed
            and self.spec not in self.profiles
            and self.session.phase in ("done", "idle", "failed")
        ):
            self.profiles[self.spec] = None  # asked for
            self._profile(self.spec)

    @work(thread=True, group="profile", exit_on_error=False)
    def _profile(self, spec: RunSpec) -> None:
        with self.measure_lock:  # never beside a measurement: it would perturb both
            data = self.engine.profile(spec, steps=5)
        self.call_from_thread(self._profiled, spec, data)

    def _profiled(self, spec: RunSpec, data: dict[str, Any]) -> None:
        self.profiles[spec] = data
        if self.main.query_one(TabbedContent).active == "profile" and spec == self.spec:
            self.main.query_one(ProfileView).show(data)

    def refresh_code(self) -> None:
        if self.spec is None:
            return
        titles = {b.name: b.title for b in all_backends()}
        if is_code_ref(self.spec.workload):
            path = ref_path(self.spec.workload)
            source, message, detail = recheck(path)
            message, detail = (
                (message, detail) if message else self.code_errors.get(self.spec.workload, ("", ""))
            )
            title = titles.get(self.spec.backend, self.spec.backend)
            show_user_code(self.main.query_one(CodeView), path, source, title, message, detail)
            return
        self.main.query_one(CodeView).show(*viewmodels.code_panes(self.spec, titles))

    def refresh_telemetry(self, pace: Any = None) -> None:
        """Redraw the visible telemetry; a tick (`pace` given) redraws only as often as it says."""
        panel_s, chart_s = (pace.panel_s, pace.chart_s) if pace is not None else (0.0, 0.0)
        device = self.spec.device if self.spec is not None else "cpu"
        history = list(self.sampler.history) if self.sampler is not None else []
        active = self.main.query_one(TabbedContent).active
        side_visible = not self.main.has_class("narrow")
        for panel_id, chart_id, visible in (
            ("#telemetry-side", "#tchart-side", side_visible),
            ("#telemetry-full", "#tchart-full", active == "telemetry"),
        ):
            if visible:
                panel = self.main.query_one(panel_id, TelemetryPanel)
                panel.show(self.latest, self.nvml_line, device, panel_s)
                self.main.query_one(chart_id, TelemetryChart).show(history, device, chart_s)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_all()


def _code_scenarios(sset: ScenarioSet, paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Put the user's code files first in the scenario list; a broken one is a warning."""
    found: dict[str, Any] = {}
    problems: list[str] = []
    kept: list[Path] = []
    for path in paths:
        try:
            sc = scenario_for(path)
        except UserCodeError as exc:
            problems.append(f"code file {path}: {exc.summary}")
            continue
        found[sc.name] = sc
        kept.append(Path(sc.path or path))
    sset.scenarios = {**found, **{k: v for k, v in sset.scenarios.items() if k not in found}}
    return kept, problems


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
