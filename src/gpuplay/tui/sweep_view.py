"""The Sweep tab: when does the GPU pay off? Time per step against size, one line per configuration.

The sweep runs as its own command in a child process (`python -m gpuplay sweep … --progress-json
--out FILE`): every point is a full measurement by that command's engine, and the tab draws each
point the moment its progress line arrives. While it runs, the tab holds the app's measurement
lock, so the live tab's measurements wait instead of sharing the machine with it.
"""

from __future__ import annotations

import contextlib
import json
import math
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from gpuplay.core.catalogue.scenarios import builtin_dir
from gpuplay.core.measure.sweepfit import crossing, fit_floor_rate
from gpuplay.core.process.lifeline import spawn
from gpuplay.core.reports.report import fmt_time
from gpuplay.core.reports.sweepreport import crossover_text, fit_text, fmt_value
from gpuplay.core.storage.safetext import visible
from gpuplay.core.workloads import get_workload
from gpuplay.tui.widgets import CachedPlot

HINT = (
    "[b]enter[/] sweeps the scenario's size: every configuration timed at each size, smallest first. "
    "[b]n[/] parameter · [b], .[/] smallest size · [b][ ][/] largest · [b]v[/] time ↔ speedup · "
    "headless: gpuplay sweep SCENARIO --over n=32..512"
)


def size_params(workload_name: str) -> list[str]:
    """The numeric parameters a sweep can go over, size parameters first."""
    w = get_workload(workload_name)
    numeric = [p for p in w.params if p.kind in (int, float)]
    return [p.name for p in sorted(numeric, key=lambda p: not p.size)]


def default_range(workload_name: str, param: str, value: float) -> tuple[float, float]:
    """From a 16th of the scenario's size to twice it, in powers of two, within the parameter's limits."""
    p = get_workload(workload_name).param(param)
    lo = max(p.minimum or 1, value / 16)
    hi = min(p.maximum or math.inf, value * 2)
    lo = 2 ** math.floor(math.log2(lo)) if lo >= 1 else lo
    return lo, max(hi, lo * 2)


def reference_of(labels: Sequence[str], label: str) -> str | None:
    """NumPy on the CPU in this series' dtype (the label's third word), else the first NumPy CPU."""
    numpy = [x for x in labels if x.startswith("numpy cpu")]
    dtype = label.split(" ")[2] if label.count(" ") >= 2 else ""
    same = [x for x in numpy if x.split(" ")[2:3] == [dtype]]
    candidates = same or numpy or list(labels[:1])
    if not candidates:
        return None
    ref = candidates[0]
    if ref != label:
        return ref
    return labels[0] if labels[0] != label else None  # a reference itself: against the first line


def _medians(points: Sequence[Mapping[str, Any]]) -> dict[float, float]:
    out = {}
    for p in points:
        v, m = p.get("value"), p.get("median")
        if isinstance(v, int | float) and isinstance(m, int | float) and m > 0 and p.get("status") == "ok":
            out[float(v)] = float(m)
    return out


def live_fit(points: Sequence[Mapping[str, Any]]) -> Any:
    """The floor/rate model from the points so far (work recovered as rate × median)."""
    works, times, unit = [], [], "GFLOP/s"
    for p in points:
        m = p.get("median")
        if not isinstance(m, int | float) or m <= 0 or p.get("status") != "ok":
            continue
        if p.get("gflops"):
            works.append(p["gflops"] * 1e9 * m)
        elif p.get("gbps"):
            works.append(p["gbps"] * 1e9 * m)
            unit = "GB/s"
        else:
            continue
        times.append(m)
    return fit_floor_rate(works, times, unit)


def live_crossovers(param: str, series: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Measured crossings so far, each series against its reference (as the command's)."""
    labels = list(series)
    out = []
    for label in labels:
        ref = reference_of(labels, label)
        if ref is None or ref == label:
            continue
        a, b = _medians(series[label]), _medians(series[ref])
        xs = sorted(set(a) & set(b))
        if len(xs) < 2:
            continue
        at, _ = crossing(xs, [a[x] for x in xs], [b[x] for x in xs])
        faster, slower = (label, ref) if a[xs[-1]] < b[xs[-1]] else (ref, label)
        reason = (f"{slower} never faster over {param}={fmt_value(xs[0])}–{fmt_value(xs[-1])}" if at is None
                  else f"{faster} faster from {param}≈{fmt_value(at)}")  # fmt: skip
        out.append({"faster": faster, "slower": slower, "at": at, "reason": reason})
    return out


PALETTE = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray")


def log_ticks(lo: float, hi: float) -> list[float]:
    """log₁₀ positions of 1-2-5 values within [lo, hi] (log₁₀ too): decades when the span is wide."""
    mantissas = (1.0,) if hi - lo > 2.5 else (1.0, 2.0, 5.0)
    ticks = [
        k + math.log10(m)
        for k in range(math.floor(lo), math.ceil(hi) + 1)
        for m in mantissas
        if lo - 1e-9 <= k + math.log10(m) <= hi + 1e-9
    ]
    return ticks or [lo, hi]


class SweepChart(CachedPlot):
    """log₂(size) across, log₁₀(time or speedup) up: a line per configuration, floors, roofs, crossings."""

    def show(
        self,
        param: str,
        series: Mapping[str, Sequence[Mapping[str, Any]]],
        crossovers: Sequence[Mapping[str, Any]],
        speedup: bool,
        title: str,
    ) -> None:
        key = (title, speedup, tuple((k, tuple(map(str, v))) for k, v in series.items()), str(crossovers))
        if self.unchanged(key):
            return
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(title)
        labels = list(series)
        ys_all: list[float] = []
        xs_all: set[float] = set()
        for label in labels:
            med = _medians(series[label])
            if speedup:
                ref = reference_of(labels, label)
                if label.startswith("numpy cpu") and ref not in labels[:1]:
                    continue  # a reference itself: it is the 1× line
                base = _medians(series.get(ref or "", []))
                med = {x: base[x] / t for x, t in med.items() if x in base}
            if not med:
                continue
            xs = sorted(med)
            ys = [math.log10(med[x]) for x in xs]
            color = PALETTE[labels.index(label) % len(PALETTE)]  # a configuration keeps its colour
            plt.plot([math.log2(x) for x in xs], ys, label=label, marker="braille", color=color)
            ys_all += ys
            xs_all |= set(xs)
            if not speedup:
                fit = live_fit(series[label])
                if fit is not None and fit.floor_s > 0:
                    plt.hline(math.log10(fit.floor_s), color=color)  # this line's launch/dispatch floor
        if not speedup:
            self._roofs(series, ys_all)
        else:
            plt.hline(0.0)  # 1×: as fast as NumPy on the CPU
            ys_all.append(0.0)
        for c in crossovers:
            at = c.get("at")
            if isinstance(at, int | float) and at > 0:
                plt.vline(math.log2(at))
                xs_all.add(float(at))
        if xs_all and ys_all:
            ticks = sorted(xs_all)
            ticks = ticks[:: max(1, len(ticks) // 8)]
            plt.xticks([math.log2(x) for x in ticks], [fmt_value(x) for x in ticks])
            lo, hi = min(ys_all), max(ys_all)
            pad = max(0.05, 0.05 * (hi - lo))  # keeps the 1× line and the extremes inside the frame
            plt.ylim(lo - pad, hi + pad)
            ticks_y = log_ticks(lo - pad, hi + pad)
            fmt = (lambda k: f"{10**k:.3g}×") if speedup else (lambda k: fmt_time(10**k))
            plt.yticks(ticks_y, [fmt(k) for k in ticks_y])
            plt.xlabel(f"{param} (log scale; | crossover)")
            plt.ylabel("speedup over NumPy CPU" if speedup else "time per step (— floor)")
        self.changed()

    def _roofs(self, series: Mapping[str, Sequence[Mapping[str, Any]]], ys_all: list[float]) -> None:
        """The roofline's bound at each size, once per device, where the device is calibrated."""
        seen: set[str] = set()
        for label, points in series.items():
            device = label.split(" ")[1] if " " in label else label
            roof = [(float(p["value"]), float(p["roof_s"])) for p in points
                    if isinstance(p.get("roof_s"), int | float) and p["roof_s"] > 0]  # fmt: skip
            if device in seen or len(roof) < 2:
                continue
            seen.add(device)
            ys = [math.log10(t) for _, t in roof]
            self.plt.plot([math.log2(x) for x, _ in roof], ys, label=f"roof {device}", marker="·")
            ys_all += ys


class SweepView(Vertical, can_focus=True):
    """The tab: its own sweep state and the worker that runs the child command."""

    DEFAULT_CSS = """
    SweepView { height: 1fr; }
    SweepView:focus { background-tint: $foreground 0%; }
    #sweep-status { height: auto; padding: 0 1; }
    #sweep-chart { height: 1fr; }
    #sweep-notes { height: auto; max-height: 8; padding: 0 1; }
    """
    BINDINGS = [
        Binding("enter", "start_stop", "start/stop sweep"),
        Binding("n", "next_param", "parameter"),
        Binding("comma", "low(0.5)", "smaller start", show=False),
        Binding("full_stop", "low(2)", "larger start", show=False),
        Binding("left_square_bracket", "high(0.5)", "smaller end"),
        Binding("right_square_bracket", "high(2)", "larger end"),
        Binding("v", "toggle_speedup", "time/speedup"),
    ]

    running: reactive[bool] = reactive(False)
    speedup: reactive[bool] = reactive(False)

    def __init__(self, *, interactive: bool = True, **kw: Any) -> None:
        super().__init__(**kw)
        self.budget_s = 0.2  # per point: a sweep of 2 lines × 6 sizes is seconds, not minutes
        self.max_step_s = 5.0
        self.backends = "numpy,torch,cupy"
        # Set by a deck's sweep step; None: the tab's own choice (every device the engine found).
        self.devices: str | None = None
        self.dtypes = "float32"
        self.variants = "base"
        self.transfers: str | None = None
        self.preset: str | None = None
        self.fixed_over: str | None = None  # a deck's sizes, as written ("n=32..1024")
        self.interactive = interactive  # takes the focus and its keys (the playground's tab; not a deck)
        self.can_focus = interactive  # in the presenter, its keys (n, enter) are the presenter's
        self.step_key: Any = None  # the deck step shown (presenter)
        self.kept: dict[Any, tuple[dict[str, list[dict[str, Any]]], dict[str, Any] | None]] = {}
        self.scenario: Any = None
        self.param = ""
        self.low: float = 0.0
        self.high: float = 0.0
        self.series: dict[str, list[dict[str, Any]]] = {}
        self.total = 0
        self.doc: dict[str, Any] | None = None  # the command's final sweep (with fits and predictions)
        self.error = ""
        self.notes: list[str] = []  # the command's other stderr lines: refusals, stops
        self._proc: subprocess.Popen[str] | None = None
        self._stop = threading.Event()
        self._gen = 0  # which sweep the worker's messages belong to (a deck step may move on)

    def compose(self) -> ComposeResult:
        yield Static(HINT, id="sweep-status")
        yield SweepChart(id="sweep-chart")
        yield Static("", id="sweep-notes")

    def on_unmount(self) -> None:
        self.kill()  # the app is going: the child and its engine go with it

    def on_show(self) -> None:
        if self.interactive:
            self.focus()  # its keys (enter, n, [ ], v) work as soon as the tab is shown
        self.refresh_view()

    # -- what to sweep ---------------------------------------------------------------------
    def follow(self, scenario: Any, preset: str | None) -> None:
        """Take the app's scenario; a new one resets the parameter and range (never mid-sweep)."""
        if scenario is None or self.running or scenario is self.scenario:
            return
        self.scenario = scenario
        params = size_params(scenario.workload)
        self.param = params[0] if params else ""
        if self.param:
            try:
                value = scenario.preset_params(preset).get(self.param)
            except ValueError:
                value = None
            value = value if isinstance(value, int | float) and value > 0 else 64
            self.low, self.high = default_range(scenario.workload, self.param, float(value))

    def configure(self, scenario: Any, step: Any) -> None:
        """Take a deck's sweep step (core.sweep.SweepStep) as it is written; forget what was drawn."""
        self.kill()
        self._gen += 1  # whatever the previous step's child still says is ignored
        self.running = False
        self.scenario, self.param, self.fixed_over = scenario, step.param, step.over
        self.backends, self.devices = ",".join(step.backends), ",".join(step.devices)
        self.dtypes, self.variants, self.transfers = (
            ",".join(step.dtypes),
            ",".join(step.variants),
            step.transfers,
        )
        self.budget_s, self.max_step_s = step.budget_s, step.max_step_s
        self.series, self.doc, self.error, self.notes, self.total = {}, None, "", [], 0
        self.refresh_view()

    @property
    def over(self) -> str:
        if self.fixed_over:
            return self.fixed_over
        return f"{self.param}={fmt_value(self.low)}..{fmt_value(self.high)}"

    def action_next_param(self) -> None:
        if self.running or self.scenario is None or self.fixed_over:
            return
        params = size_params(self.scenario.workload)
        if not params:
            return
        self.param = (
            params[(params.index(self.param) + 1) % len(params)] if self.param in params else params[0]
        )
        value = self.scenario.params.get(
            self.param, get_workload(self.scenario.workload).param(self.param).default
        )
        self.low, self.high = default_range(self.scenario.workload, self.param, float(value or 64))
        self.refresh_view()

    def _limits(self) -> tuple[float, float]:
        p = get_workload(self.scenario.workload).param(self.param)
        return float(p.minimum or 1), float(p.maximum or math.inf)

    def action_low(self, factor: float) -> None:
        if self.running or not self.param or self.fixed_over:
            return
        lo, _ = self._limits()
        self.low = min(max(lo, self.low * factor), self.high / 2)
        self.refresh_view()

    def action_high(self, factor: float) -> None:
        if self.running or not self.param or self.fixed_over:
            return
        _, hi = self._limits()
        self.high = max(min(hi, self.high * factor), self.low * 2)
        self.refresh_view()

    def action_toggle_speedup(self) -> None:
        self.speedup = not self.speedup

    def watch_speedup(self) -> None:
        self.refresh_view()

    def watch_running(self) -> None:
        self.refresh_view()

    # -- running ----------------------------------------------------------------------------
    def command(self, out: Path) -> list[str]:
        sc = self.scenario
        name = str(sc.path) if sc.workload.startswith("code:") and sc.path else sc.name
        args = [sys.executable, "-m", "gpuplay"]
        folder = Path(sc.path).parent if sc.path is not None else None
        if folder is not None and not sc.workload.startswith("code:") and folder != builtin_dir():
            args += ["--scenarios", str(folder)]  # a user's folder wins by name
        app: Any = self.app
        devices = self.devices or ",".join(["cpu", *(["cuda"] if _cuda_listed() else [])])
        transfers = self.transfers or ("both" if "cuda" in devices else "off")
        # A preset the scenario lacks (a code file without PRESETS) is its own parameters, as the
        # Live tab takes it (core/studies/session.py), never a sweep that fails on start.
        preset = self.preset or getattr(app, "preset", None) or "quick"
        # The presenter's step names its scenario only (its deck checked the preset when it loaded).
        presets = getattr(sc, "presets", None)
        preset = str(preset) if presets is None or preset in presets else "default"
        args += ["sweep", name, "--over", self.over, "--backends", self.backends, "-d", devices,
                 "--dtypes", self.dtypes, "--variants", self.variants,
                 "--budget", str(self.budget_s), "--max-step", str(self.max_step_s),
                 "--transfers", transfers, "--preset", preset,
                 "--format", "json", "--out", str(out), "--progress-json"]  # fmt: skip
        threads = getattr(getattr(app, "session", None), "threads", None)
        if threads is None:  # the presenter: the live thread policy, as its single figures use
            from gpuplay.core.hw.system import cpu_count
            from gpuplay.tui.controls import live_threads

            threads = live_threads(cpu_count())
        if threads:
            args += ["--threads", str(threads)]
        return args

    def action_start_stop(self) -> None:
        if self.running:
            self.stop()
        else:
            self.start()

    def start(self) -> None:
        if self.running or self.scenario is None or not self.param:
            return
        self.series, self.doc, self.error, self.notes, self.total = {}, None, "", [], 0
        self._stop = threading.Event()
        self._gen += 1
        self.running = True
        self._run(self._gen, self._stop)

    def stop(self) -> None:
        """Stop after the point being measured (the command keeps what finished)."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGINT)

    def kill(self) -> None:
        """The app is going: the child and its engine go with it."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.terminate()

    @work(thread=True, group="sweep", exit_on_error=False)
    def _run(self, gen: int, stop: threading.Event) -> None:
        app: Any = self.app
        lock = getattr(app, "measure_lock", None) or contextlib.nullcontext()
        with tempfile.TemporaryDirectory(prefix="gpuplay-sweep-") as tmp:
            out = Path(tmp) / "sweep.json"
            error, doc = "", None
            try:
                with lock:  # the live tab waits: two measurements at once would perturb both
                    if stop.is_set():
                        self.app.call_from_thread(self._finished, gen, None, "")
                        return
                    # spawn: the child (and through it its engine) dies with the app, even by SIGKILL
                    proc = spawn(self.command(out), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
                    self._proc = proc
                    assert proc.stderr is not None
                    for line in proc.stderr:
                        self.app.call_from_thread(self._line, line.rstrip("\n"), gen)
                    proc.wait()
                if out.exists():
                    doc = json.loads(out.read_text(encoding="utf-8"))
                if proc.returncode not in (0, 130, 143) and not stop.is_set():
                    error = self.notes[-1] if self.notes else f"exit code {proc.returncode}"
            except Exception as exc:  # noqa: BLE001 - any failure ends the sweep with its reason, never a spinner forever
                error = f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(self._finished, gen, doc, error)

    def _line(self, line: str, gen: int) -> None:
        """One stderr line of the command: a progress event, or a message to show as it is."""
        if gen != self._gen:
            return
        line = "".join(ch for ch in line if ch.isprintable())  # a stray escape code is not drawn
        event = None
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                event = json.loads(line)
        if not isinstance(event, dict):
            if line.strip() and not line.startswith("wrote "):  # the file is the tab's own
                self.notes.append(line.strip())
        elif isinstance(event.get("plan"), dict):
            plan = event["plan"]
            self.series = {str(label): [] for label in plan.get("series") or []}
            self.total = len(self.series) * len(plan.get("values") or [])
        elif isinstance(event.get("point"), dict):
            point = event["point"]
            self.series.setdefault(str(point.get("series")), []).append(point)
        self.refresh_view()

    def _finished(self, gen: int, doc: Any, error: str) -> None:
        if gen != self._gen:
            return
        self._proc = None
        sweep = doc.get("sweep") if isinstance(doc, dict) else None
        if isinstance(sweep, dict):
            self.doc = sweep
            self.series = {
                str(s.get("label")): list(s.get("points") or []) for s in sweep.get("series") or []
            }
        self.error = error
        self.running = False
        if self.step_key is not None and self.doc is not None:
            self.kept[self.step_key] = (self.series, self.doc)
        if error:
            self.app.notify(error, title="sweep failed", severity="error", timeout=8, markup=False)
        self.refresh_view()

    # -- drawing ------------------------------------------------------------------------------
    def crossovers(self) -> list[dict[str, Any]]:
        if self.doc is not None:
            return list(self.doc.get("crossovers") or [])
        return live_crossovers(self.param, self.series)

    def refresh_view(self) -> None:
        if not self.is_mounted:
            return
        done = sum(len(v) for v in self.series.values())
        # A title from a file or a code file's TITLE: plotext would obey its escape bytes.
        title = (f"{visible(self.scenario.title, one_line=True) if self.scenario else '?'}: "
                 f"{'speedup over NumPy CPU' if self.speedup else 'time per step'} against {self.param}")  # fmt: skip
        self.query_one(SweepChart).show(self.param, self.series, self.crossovers(), self.speedup, title)
        self.query_one("#sweep-status", Static).update(self.status_line(done))
        self.query_one("#sweep-notes", Static).update(self.notes_text())

    def status_line(self, done: int) -> str:
        what = f"[b]{escape(self.over)}[/]" if self.param else "no numeric parameter to sweep"
        if not self.interactive:  # a deck's step: no keys to advertise
            state = "sweeping" if self.running else ("swept" if self.doc is not None else "sweep")
            if state == "sweep" and not done:
                return f"sweep {what}: not swept"  # replayed, or not started: no '0/? points'
            return f"{state} {what} · {done}/{self.total or done or '?'} points"
        if self.running:
            return f"[b]sweeping[/] {what} · {done}/{self.total or '?'} points · [b]enter[/] stops"
        if self.error:
            return f"[red]sweep failed:[/] {escape(self.error)}"
        if self.doc is not None:
            stopped = " (stopped: finished points kept)" if self.doc.get("interrupted") else ""
            return (f"{done} points over {what}{stopped} · [b]enter[/] sweeps again · [b]n[/] parameter · "
                    "[b], .[/] start · [b]\\[ ][/] end · [b]v[/] time ↔ speedup")  # fmt: skip
        return f"{what} · {HINT}"

    def notes_text(self) -> str:
        lines = [f"[b]×[/] {escape(crossover_text(c))}" for c in self.crossovers()]
        if self.doc is not None:
            for s in self.doc.get("series") or []:
                lines.append(f"[b]{escape(str(s.get('label')))}[/]: {escape(fit_text(s.get('fit')))}")
        else:
            for label, points in self.series.items():
                fit = live_fit(points)
                if fit is not None:
                    lines.append(f"[b]{escape(label)}[/]: {escape(fit_text(fit.to_dict()))}")
        points = [p for ps in self.series.values() for p in ps]
        if not self.speedup and any(p.get("roof_status") == "stale" for p in points):
            # A peak is a maximum: a point above its stored roof means that roof was measured low.
            lines.append("[yellow]roof: stale, a point is above the stored roof: rerun gpuplay calibrate[/]")
        elif not self.speedup and self.series and not any(p.get("roof_s") for p in points):
            lines.append("[dim]roof: not drawn, no calibration cached for this device (gpuplay calibrate)[/]")
        lines += [f"[dim]{escape(n)}[/]" for n in self.notes[-3:]]
        return "\n".join(lines)


def _cuda_listed() -> bool:
    """Whether the engine's probe saw a CUDA device (answered without importing torch here)."""
    try:
        from gpuplay.core.backends import get_backend

        avail, devices = get_backend("torch").probe(0)
        return bool(avail.ok and any(d.id.startswith("cuda") for d in devices))
    except Exception:  # a pending or failed probe: sweep the CPU
        return False


SWEEP_NOT_REPLAYED = "a sweep step: recorded sweeps are not replayed; run it live"


def show_sweep_step(app: Any, step: Any, live: bool) -> bool:
    """The presenter's hook: for a deck step with a sweep, show the growing sweep instead of the
    step's single figure (and start it once, when `live`); True when the step is a sweep step."""
    from types import SimpleNamespace

    from gpuplay.core.storage.safetext import visible

    view = app.query_one(SweepView)
    is_sweep = step.sweep is not None
    # Classes, not inline `display`: an inline style would beat the presenter's blank screen.
    view.set_class(not is_sweep, "hidden")
    app.query_one("#middle").set_class(is_sweep, "hidden")
    if not is_sweep:
        return False
    key = (step.spec.scenario, step.sweep)
    if view.step_key != key:
        kept = view.kept.get(key)
        scenario = SimpleNamespace(name=step.spec.scenario, workload=step.spec.workload,
                                   title=visible(step.scenario_title, one_line=True), path=None)  # fmt: skip
        view.configure(scenario, step.sweep)
        view.step_key = key
        if kept is not None:  # swept earlier in this talk: shown again, not measured again
            view.series, view.doc = kept
        elif live:
            view.start()
        else:  # replayed: nothing was recorded for it, and no label may suggest otherwise
            view.notes = [SWEEP_NOT_REPLAYED]
        view.refresh_view()
    return True
