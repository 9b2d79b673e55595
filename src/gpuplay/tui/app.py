"""The gpuplay playground. The app owns every piece of state and reacts to messages;
thread workers run the core engine and only post messages back.
"""

from __future__ import annotations

import datetime as _dt
import functools
import gc
import threading
import time
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, OptionList, TabbedContent, TabPane
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from gpuplay.core.backends import all_backends, get_backend
from gpuplay.core.compare import attach_baselines, baseline_spec, is_baseline
from gpuplay.core.config import load_config
from gpuplay.core.report import fmt_time
from gpuplay.core.result import RunResult
from gpuplay.core.runner import run
from gpuplay.core.scenarios import Scenario, ScenarioSet, load_scenarios
from gpuplay.core.sessionlog import SessionLog, write_atomic
from gpuplay.core.spec import RunSpec
from gpuplay.core.stats import summarize
from gpuplay.core.system import cpu_count
from gpuplay.core.telemetry import RunTelemetry, Sampler, Snapshot, nvml_status
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import ITEMSIZE
from gpuplay.tui.controls import cycle, live_threads
from gpuplay.tui.messages import ProbesDone, RunFinished, RunPhase, RunProgress, TelemetryTick
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

PRESETS = ("quick", "published", "default")
MAX_SESSION_RESULTS = 500  # in memory; every one is also in the session log on disk
LIVE_MAX_STEPS = 10_000  # a 2 s budget of µs-steps would otherwise keep 10^5+ samples per run
STEP_LIMITS = (2.0, 10.0, 60.0)
LIVE_BUDGET_S = 2.0
PROGRESS_INTERVAL_S = 0.1  # per-step timings reach the UI at most ~10 times a second


class _Coalescer:
    """Collects step timings in the worker thread and posts them in batches."""

    def __init__(self, app: App, run_id: int) -> None:
        self.app, self.run_id = app, run_id
        self.pending: list[tuple[str, float]] = []
        self.last = time.monotonic()

    def add(self, phase: str, dt: float) -> None:
        self.pending.append((phase, dt))
        now = time.monotonic()
        if now - self.last >= PROGRESS_INTERVAL_S:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.app.post_message(RunProgress(self.run_id, batch))
        self.last = now or time.monotonic()


class GpuPlayApp(App[None]):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses live elsewhere
    TITLE = "gpuplay"
    SUB_TITLE = "the same array code, NumPy → PyTorch → CuPy, CPU → GPU"

    BINDINGS = [
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
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        scenario_dirs: list[Path] | None = None,
        *,
        autostart: bool = True,
        telemetry: bool = True,
        export_dir: Path | None = None,
        preset: str = "quick",
        budget_s: float = LIVE_BUDGET_S,
    ) -> None:
        super().__init__()
        cfg = load_config()
        self.config_problems = cfg.problems
        self.scenario_set: ScenarioSet = load_scenarios([*cfg.scenario_dirs, *(scenario_dirs or [])])
        self.autostart = autostart
        self.export_dir = export_dir or Path.cwd()
        self.preset = preset
        self.step_limit = STEP_LIMITS[0]
        self.budget_s = budget_s
        names = list(self.scenario_set.scenarios)
        self.scenario: Scenario | None = self.scenario_set.scenarios[names[0]] if names else None
        self.spec: RunSpec | None = None  # the live configuration
        self.run_id = 0
        self.cancel = threading.Event()
        self.paused = threading.Event()
        self.measure_lock = threading.Lock()  # at most one measurement at any time
        self.samples: list[tuple[str, float]] = []
        self.phase = "starting"
        self.live_result: RunResult | None = None
        self.results: list[RunResult] = []
        self.baselines: dict[RunSpec, RunResult] = {}
        self.baseline_running = False
        self.probed = False
        self.session_log = SessionLog()
        self.sampler = Sampler(cfg.sample_interval, on_snapshot=self._post_snapshot) if telemetry else None
        self.nvml_line = ""
        self.latest: Snapshot | None = None
        self._scenario_timer: Any = None

    # -- layout ---------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                options = [Option(f"{s.title}", id=s.name) for s in self.scenario_set.scenarios.values()]
                yield OptionList(*options, id="scenarios")
                yield ControlsPanel(id="controls")
            with TabbedContent(id="tabs", initial="live"):
                with TabPane("Live", id="live"):
                    with Horizontal(id="live-top"):
                        yield SpeedupDigits(id="speedup")
                        yield StatsPanel(id="stats")
                    yield StepChart(id="chart")
                    yield ClaimLine(id="claim")
                with TabPane("Compare", id="compare"):
                    yield CompareView()
                with TabPane("Code", id="code"):
                    yield CodeView()
                with TabPane("Telemetry", id="telemetry"):
                    yield TelemetryPanel(id="telemetry-full")
                    yield TelemetryChart(id="tchart-full")
            with Vertical(id="side-telemetry"):
                yield TelemetryPanel(id="telemetry-side")
                yield TelemetryChart(id="tchart-side")
        yield Footer()

    @property
    def main(self) -> Any:
        """The playground's own screen: queries must not land on the help screen above it."""
        return self.screen_stack[0] if self.screen_stack else self.screen

    def on_mount(self) -> None:
        self.main.query_one("#scenarios", OptionList).border_title = "scenarios"
        self._adapt_layout(self.size.width, self.size.height)
        for problem in self.config_problems:
            self.notify(problem, severity="warning")
        for err in self.scenario_set.errors:
            self.notify(str(err), title="scenario not loaded", severity="warning", timeout=8)
        if self.scenario is None:
            self.notify("no scenarios found", severity="error")
            return
        self.spec = self._make_spec()
        self.refresh_all()
        if self.sampler is not None:
            self.nvml_line = nvml_status()
            self.sampler.start()
        # torch's import (~2 s) and device probes run off the UI thread; the first
        # frame does not wait for them, and the first measurement does (it would
        # otherwise share the CPU with the import).
        self._probe()

    def on_resize(self, event: Any) -> None:
        self._adapt_layout(event.size.width, event.size.height)
        self.refresh_controls()

    def _adapt_layout(self, width: int, height: int) -> None:
        self.main.set_class(width < 150, "narrow")
        self.main.set_class(height < 32, "short")

    def on_unmount(self) -> None:
        self.cancel.set()
        self.paused.clear()
        if self.sampler is not None:
            self.sampler.stop()

    # -- workers: plain engine calls that only post messages ---------------------------
    @work(thread=True, group="probe", exit_on_error=False)
    def _probe(self) -> None:
        for b in all_backends():
            b.start_probe()
        # The first measurement needs NumPy and PyTorch; CuPy's probe can take >10 s on some
        # machines, so its answer arrives later and only redraws the controls.
        for name in ("numpy", "torch"):
            get_backend(name).probe()
        self.post_message(ProbesDone(final=False))
        get_backend("cupy").probe()
        self.post_message(ProbesDone(final=True))

    @work(thread=True, group="measure", exit_on_error=False)
    def _measure(
        self, spec: RunSpec, run_id: int, role: str, cancel: threading.Event, pause: threading.Event
    ) -> None:
        with self.measure_lock:
            if cancel.is_set():
                return
            sink = _Coalescer(self, run_id)
            telemetry = RunTelemetry(self.sampler) if self.sampler is not None else None
            result = run(
                spec,
                on_sample=sink.add if role == "live" else None,
                cancel=cancel,
                pause=pause,
                on_phase=lambda ph, _d: self.post_message(RunPhase(run_id, ph)),
                telemetry=telemetry,
            )
            sink.flush()
        self.post_message(RunFinished(run_id, result, role))

    def _post_snapshot(self, snap: Snapshot) -> None:
        self.post_message(TelemetryTick(snap))

    # -- starting and stopping measurements ------------------------------------------------
    def _make_spec(self, base: RunSpec | None = None) -> RunSpec:
        assert self.scenario is not None
        sc = self.scenario
        params = sc.preset_params(None if self.preset == "default" else self.preset)
        common = dict(
            scenario=sc.name,
            threads=live_threads(cpu_count()),
            budget_s=self.budget_s,
            max_step_s=self.step_limit,
            warmup=3,
            max_repeat=LIVE_MAX_STEPS,
        )
        if base is None:
            return RunSpec.make(sc.workload, params, **common)
        if base.workload == sc.workload and "method" in base.params:
            params["method"] = base.params["method"]
        return base.replace(workload=sc.workload, params=params, **common)

    def start_measurement(self) -> None:
        """Cancel whatever runs (it stops within one step) and measure the live spec."""
        if self.spec is None or not self.probed:
            return
        self.cancel.set()
        self.cancel = threading.Event()
        self.paused.clear()
        self.run_id += 1
        self.samples = []
        self.live_result = None
        self.baseline_running = False
        self.phase = "queued"
        self._measure(self.spec, self.run_id, "live", self.cancel, self.paused)
        self.refresh_all()

    def _start_baseline(self) -> None:
        assert self.spec is not None
        base = baseline_spec(self.spec)
        if base in self.baselines or is_baseline(self.spec) or not self.autostart:
            return
        self.baseline_running = True
        self._measure(base, self.run_id, "baseline", self.cancel, self.paused)

    def baseline_for(self, spec: RunSpec) -> RunResult | None:
        try:
            return self.baselines.get(baseline_spec(spec))
        except (KeyError, ValueError):
            return None

    # -- messages ----------------------------------------------------------------
    def on_probes_done(self, msg: ProbesDone) -> None:
        if msg.final:
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
            self.phase = "idle"
            self.refresh_all()

    def on_run_phase(self, msg: RunPhase) -> None:
        if msg.run_id == self.run_id and not self.baseline_running:
            self.phase = msg.phase
            if self.main.query_one(TabbedContent).active == "live":
                self.refresh_stats()

    def on_run_progress(self, msg: RunProgress) -> None:
        if msg.run_id != self.run_id:
            return  # a cancelled run's last steps
        self.samples.extend(msg.samples)
        if self.main.query_one(TabbedContent).active == "live":
            self.refresh_live()

    def on_run_finished(self, msg: RunFinished) -> None:
        r = msg.result
        if r.usable and r.status == "ok":
            self.results.append(r)
            if len(self.results) > MAX_SESSION_RESULTS:
                dropped = self.results.pop(0)
                if self.baselines.get(dropped.spec) is dropped:
                    del self.baselines[dropped.spec]
            if not self.session_log.append(r):
                self.notify(self.session_log.error or "session log not written", severity="warning")
            if is_baseline(r.spec):
                self.baselines[r.spec] = r
        if msg.run_id != self.run_id:
            return
        if msg.role == "baseline":
            self.baseline_running = False
            if r.status in ("failed", "refused"):
                self.notify(f"NumPy baseline {r.status}: {r.message}", severity="warning")
            self.refresh_all()
            return
        self.live_result = r
        self.phase = "done" if r.status == "ok" else r.status
        if r.status in ("failed", "refused"):
            self.notify(r.message, title=f"{r.spec.label()} {r.status}", severity="error", timeout=8)
        elif r.status == "ok":
            if r.check_ok is False:
                self.notify(
                    f"result differs from float64 by {r.error:.1e} (tolerance {r.tolerance:.1e})",
                    severity="warning",
                )
            self._start_baseline()
        self.refresh_all()

    def on_telemetry_tick(self, msg: TelemetryTick) -> None:
        self.latest = msg.snapshot
        self.refresh_telemetry()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The one place unexpected worker errors land: show them, keep the app running.
        if event.state == WorkerState.ERROR:
            err = event.worker.error
            self.phase = "failed"
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

    def choose_scenario(self, name: str | None) -> None:
        if not name or name not in self.scenario_set.scenarios:
            return
        self.scenario = self.scenario_set.scenarios[name]
        self.spec = self._make_spec(self.spec)
        self.start_measurement()

    # -- actions -----------------------------------------------------------------
    def action_cycle(self, field: str) -> None:
        if self.spec is None:
            return
        new, why = cycle(self.spec, field)
        if why:
            self.notify(why, title=f"no other {field} available", severity="warning", timeout=8)
        if new != self.spec:
            self.spec = new
            self.start_measurement()
        self.refresh_controls()

    def action_cycle_preset(self) -> None:
        self.preset = PRESETS[(PRESETS.index(self.preset) + 1) % len(PRESETS)]
        if self.spec is not None:
            self.spec = self._make_spec(self.spec)
            self.start_measurement()

    def action_cycle_limit(self) -> None:
        self.step_limit = STEP_LIMITS[(STEP_LIMITS.index(self.step_limit) + 1) % len(STEP_LIMITS)]
        if self.spec is not None:
            self.spec = self._make_spec(self.spec)
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
        self.results.clear()
        self.baselines.clear()
        self.notify("session cleared (the session log on disk keeps every measurement)")
        self.start_measurement()

    def action_tab(self, tab: str) -> None:
        self.main.query_one(TabbedContent).active = tab  # TabActivated refreshes the new view

    def action_help(self) -> None:
        rows = [(b.key.replace("question_mark", "?"), b.description) for b in self.BINDINGS]
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
        self.refresh_telemetry()

    def refresh_controls(self) -> None:
        if self.spec is not None:
            compact = self.main.has_class("narrow") and self.size.width < 110
            probes = tuple(b.availability(0).pending for b in all_backends())
            self.main.query_one(ControlsPanel).show(
                self.spec, self.preset, self.step_limit, self.paused.is_set(), compact, probes
            )

    def timed_summary(self) -> Any:
        return summarize([dt for ph, dt in self.samples if ph == "timed"])

    def refresh_stats(self) -> None:
        r = self.live_result
        phase = self.phase if self.probed else "probing backends (importing torch)…"
        if self.paused.is_set():
            phase += " (paused)"
        info: dict[str, Any] = dict(zip(("flops", "bytes"), _cost(self.spec))) if self.spec else {}
        if r is not None:
            info.update(
                result=r if r.error is not None else None,
                conditions=r.conditions,
                compile_s=r.compile_s,
                notes=r.notes,
                message=r.message if r.status in ("failed", "refused") else "",
            )
            info["flops"], info["bytes"] = r.flops or info.get("flops"), r.bytes or info.get("bytes")
        compile_s = next((dt for ph, dt in self.samples if ph == "compile"), None)
        if compile_s is not None:
            info["compile_s"] = compile_s
        self.main.query_one(StatsPanel).show(self.spec, self.timed_summary(), phase, info)

    def refresh_live(self) -> None:
        self.refresh_stats()
        summary = self.timed_summary()
        base = self.baseline_for(self.spec) if self.spec is not None else None
        speedup = None
        note = ""
        if self.spec is not None and is_baseline(self.spec):
            note = "this is the baseline"
            speedup = 1.0 if summary else None
        elif base is not None and summary is not None and base.median:
            speedup = base.median / summary.median
            note = f"(NumPy {base.spec.dtype}: {fmt_time(base.median)})"
        elif self.baseline_running:
            note = "measuring the NumPy baseline…"
        self.main.query_one(SpeedupDigits).show(speedup, note)
        title = ""
        if self.spec is not None and self.scenario is not None:
            w = get_workload(self.spec.workload)
            try:
                size = w.size_label(w.resolve(self.spec.params))
            except ValueError:
                size = "?"
            title = f"{self.scenario.title} · {size} · step times"
        self.main.query_one(StepChart).show(self.samples, summary.median if summary else None, title)
        self.main.query_one(ClaimLine).show(self.scenario)

    def refresh_compare(self) -> None:
        rows = attach_baselines(self.results)
        focus = None
        if self.spec is not None:
            w = get_workload(self.spec.workload)
            try:
                focus = (self.spec.workload, w.size_label(w.resolve(self.spec.params)))
            except ValueError:
                focus = None
        self.main.query_one(CompareView).show(rows, focus)

    def refresh_code(self) -> None:
        if self.spec is None:
            return
        w = get_workload(self.spec.workload)
        p = w.resolve(self.spec.params)
        right_backend = self.spec.backend if self.spec.backend != "numpy" else "torch"
        levers = []
        if self.spec.amp != "off" and right_backend == "torch":
            levers.append(
                f"with torch.autocast('{self.spec.device.split(':')[0]}', dtype=torch."
                f"{'bfloat16' if self.spec.amp == 'bf16' else 'float16'}):"
            )
        if self.spec.compile != "off":
            levers.append(f"kernel = torch.compile(kernel, mode={self.spec.compile!r})")
        right = w.source(right_backend, p)
        if levers:
            right += "\n\n# levers applied around the kernel:\n# " + "\n# ".join(levers)
        self.main.query_one(CodeView).show(
            "NumPy  (xp = numpy, arrays on the host)",
            w.source("numpy", p),
            f"{get_backend(right_backend).title}  (xp = {right_backend}, device {self.spec.device})",
            right,
        )

    def refresh_telemetry(self) -> None:
        device = self.spec.device if self.spec is not None else "cpu"
        history = list(self.sampler.history) if self.sampler is not None else []
        active = self.main.query_one(TabbedContent).active
        side_visible = not self.main.has_class("narrow")
        for panel_id, chart_id, visible in (
            ("#telemetry-side", "#tchart-side", side_visible),
            ("#telemetry-full", "#tchart-full", active == "telemetry"),
        ):
            if visible:
                self.main.query_one(panel_id, TelemetryPanel).show(self.latest, self.nvml_line, device)
                self.main.query_one(chart_id, TelemetryChart).show(history, device)

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_all()


@functools.lru_cache(maxsize=64)
def _cost(spec: RunSpec) -> tuple[float | None, float | None]:
    """FLOPs and bytes of one step, for the live rates before the run's own figures arrive."""
    w = get_workload(spec.workload)
    try:
        p = w.effective(w.resolve(spec.params), spec.backend, spec.dtype)
    except (KeyError, ValueError):
        return None, None
    return w.flops(p), w.bytes_moved(p, ITEMSIZE[spec.dtype])


def run_app(scenario_dirs: list[Path] | None = None) -> None:
    GpuPlayApp(scenario_dirs).run()
