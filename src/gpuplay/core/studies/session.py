"""The live playground's session as plain state: what is configured, what runs, what was measured.

No Textual here: the app holds one `LiveSession`, asks it what to do, and draws what it says.
Tested directly (tests/unit/test_session.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.scenarios import Scenario, ScenarioSet, on_needed_backend
from gpuplay.core.measure.stats import Summary, summarize
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import baseline_spec, is_baseline

PRESETS = ("quick", "published", "default")
STEP_LIMITS = (2.0, 10.0, 60.0)
MAX_SESSION_RESULTS = 500  # in memory; every one is also in the session log on disk
LIVE_MAX_STEPS = 10_000  # a 2 s budget of µs-steps would otherwise keep 10^5+ samples per run
LIVE_BUDGET_S = 2.0


@dataclass
class Finished:
    """What the app should do about a finished measurement."""

    log: bool = False  # append to the session log
    current: bool = False  # it is the run on screen (not a stale or cancelled one)
    # Measure the run on screen again, paired with this NumPy baseline (its speedup, with an
    # interval: runner.paired). The role of that job is "baseline".
    start_baseline: RunSpec | None = None
    notify: list[tuple[str, str, str]] = field(default_factory=list)  # (message, title, severity)


@dataclass
class LiveSession:
    scenario_set: ScenarioSet
    threads: int | None = None
    preset: str = "quick"
    budget_s: float = LIVE_BUDGET_S
    step_limit: float = STEP_LIMITS[0]
    autostart: bool = True
    scenario: Scenario | None = None
    spec: RunSpec | None = None
    run_id: int = 0
    phase: str = "starting"
    samples: list[tuple[str, float]] = field(default_factory=list)
    live_result: RunResult | None = None
    results: list[RunResult] = field(default_factory=list)
    baselines: dict[RunSpec, RunResult] = field(default_factory=dict)
    # Paired speedups by configuration: measured with their baseline in one job, never divided
    # by a baseline from another time, thread count, dtype or size.
    speedups: dict[RunSpec, dict[str, Any]] = field(default_factory=dict)
    baseline_running: bool = False
    # What was on screen before the current run: a user's file that fails after a save keeps
    # its last good result visible.
    previous: tuple[list[tuple[str, float]], RunResult | None] = ([], None)

    def __post_init__(self) -> None:
        if self.scenario is None and self.scenario_set.scenarios:
            self.scenario = next(iter(self.scenario_set.scenarios.values()))

    # -- the configuration ------------------------------------------------------------
    def make_spec(self, base: RunSpec | None = None) -> RunSpec:
        """The live spec for the current scenario, preset and limits, keeping `base`'s levers."""
        assert self.scenario is not None
        sc = self.scenario
        # A user's code file may define no presets: its own defaults stand in for them.
        preset = self.preset if self.preset != "default" and self.preset in sc.presets else None
        params = sc.preset_params(preset)
        common: dict[str, Any] = dict(scenario=sc.name, threads=self.threads, budget_s=self.budget_s,
                                      max_step_s=self.step_limit, warmup=3, max_repeat=LIVE_MAX_STEPS)  # fmt: skip
        if base is None:
            return RunSpec.make(sc.workload, params, **common)
        if base.workload == sc.workload and "method" in base.params:
            params["method"] = base.params["method"]
        if base.scenario == sc.name:  # a new preset or step limit keeps the workload's own levers
            own = {lv.name for lv in levers.LEVERS if lv.is_param}
            params.update({k: v for k, v in base.params.items() if k in own})
        return base.replace(workload=sc.workload, params=params, **common)

    def choose_scenario(self, name: str | None) -> bool:
        if not name or name not in self.scenario_set.scenarios:
            return False
        self.scenario = self.scenario_set.scenarios[name]
        # the backend the scenario needs (the dataloader: torch), as gpuplay run without -b takes it
        self.spec = on_needed_backend(self.make_spec(self.spec))[0]
        return True

    def cycle_preset(self) -> None:
        self.preset = PRESETS[(PRESETS.index(self.preset) + 1) % len(PRESETS)]
        if self.spec is not None:
            self.spec = self.make_spec(self.spec)

    def cycle_limit(self) -> None:
        self.step_limit = STEP_LIMITS[(STEP_LIMITS.index(self.step_limit) + 1) % len(STEP_LIMITS)]
        if self.spec is not None:
            self.spec = self.make_spec(self.spec)

    # -- measurements -------------------------------------------------------------------
    def begin_run(self) -> int:
        """A new live measurement replaces whatever was on screen; returns its run id."""
        self.run_id += 1
        self.previous = (self.samples, self.live_result)
        self.samples = []
        self.live_result = None
        self.baseline_running = False
        self.phase = "queued"
        return self.run_id

    def add_samples(self, run_id: int, batch: Sequence[tuple[str, float]]) -> bool:
        if run_id != self.run_id:
            return False  # a cancelled run's last steps
        self.samples.extend(batch)
        return True

    def set_phase(self, run_id: int, phase: str) -> bool:
        if run_id != self.run_id or self.baseline_running:
            return False
        self.phase = phase
        return True

    def finish(self, run_id: int, result: RunResult, role: str) -> Finished:
        out = Finished()
        if role == "baseline":
            return self._finish_pairing(run_id, result, out)
        if result.usable and result.status == "ok":
            out.log = True
            self._keep(result)
        if run_id != self.run_id:
            return out
        out.current = True
        self.live_result = result
        self.phase = "done" if result.status == "ok" else result.status
        kept_samples, kept = self.previous
        if result.failure == "user-code" and kept is not None and kept.spec.workload == result.spec.workload:
            self.samples, self.live_result = kept_samples, kept
            self.phase = "failed: your code (the last good result stays shown)"
            out.notify.append((result.message, "your code failed", "error"))
            return out
        if result.status in ("failed", "refused"):
            out.notify.append((result.message, f"{result.spec.label()} {result.status}", "error"))
        elif result.status == "ok":
            self._after_ok(result, out)
        return out

    def _keep(self, result: RunResult) -> None:
        """A good result joins the session (the oldest leaves past the cap, and its baseline role)."""
        self.results.append(result)
        if len(self.results) > MAX_SESSION_RESULTS:
            dropped = self.results.pop(0)
            if self.baselines.get(dropped.spec) is dropped:
                del self.baselines[dropped.spec]
        if is_baseline(result.spec):
            self.baselines[result.spec] = result

    def _after_ok(self, result: RunResult, out: Finished) -> None:
        """The run on screen succeeded: warn if it misses float64, and pair it with its baseline."""
        if result.check_ok is False:
            out.notify.append(
                (
                    f"result differs from float64 by {result.error:.1e} (tolerance {result.tolerance:.1e})",
                    "",
                    "warning",
                )  # fmt: skip
            )
        out.start_baseline = self.baseline_to_measure()
        if out.start_baseline is not None:
            self.baseline_running = True

    def _finish_pairing(self, run_id: int, result: RunResult, out: Finished) -> Finished:
        """A paired job ended: keep its speedup for its configuration (and the result on screen)."""
        if result.status == "ok" and result.speedup is not None:
            self.speedups[result.spec] = result.speedup
            for r in (self.live_result, *self.results[-3:]):
                if r is not None and r.spec == result.spec and r.speedup is None:
                    r.speedup = result.speedup  # the compare table and exports read it there
        if run_id != self.run_id:
            return out
        out.current = True
        self.baseline_running = False
        if result.status in ("failed", "refused"):
            out.notify.append((f"speedup not measured: {result.status}: {result.message}", "", "warning"))
        return out

    def baseline_to_measure(self) -> RunSpec | None:
        """The NumPy baseline to pair the spec on screen with, unless its speedup is known."""
        if self.spec is None or not self.autostart or is_baseline(self.spec):
            return None
        if self.spec in self.speedups:
            return None
        try:
            return baseline_spec(self.spec)
        except (KeyError, ValueError):
            return None

    def speedup_for(self, spec: RunSpec | None) -> dict[str, Any] | None:
        return self.speedups.get(spec) if spec is not None else None

    def baseline_for(self, spec: RunSpec | None) -> RunResult | None:
        if spec is None:
            return None
        try:
            return self.baselines.get(baseline_spec(spec))
        except (KeyError, ValueError):
            return None

    def forget_workload(self, workload: str) -> None:
        """A user's file changed: its baselines measured the old code."""
        self.baselines = {s: r for s, r in self.baselines.items() if s.workload != workload}
        self.speedups = {s: r for s, r in self.speedups.items() if s.workload != workload}

    def reset(self) -> None:
        self.results.clear()
        self.baselines.clear()
        self.speedups.clear()

    def timed_summary(self) -> Summary | None:
        """The figure on screen: the finished result's own summary (its headline, which may be a
        second loop in the allocation mode a plain loop gets), else the steps streamed so far."""
        r = self.live_result
        if r is not None and r.usable and r.spec == self.spec:
            return r.summary
        return summarize([dt for ph, dt in self.samples if ph == "timed"])

    def compile_seconds(self) -> float | None:
        return next((dt for ph, dt in self.samples if ph == "compile"), None)
