"""The playground's measurements: one at a time, in a thread worker that calls the engine and only
posts messages back (RunProgress, RunPhase, RunFinished in tui/messages.py).

The App owns one `LiveRuns`; the lock is the app-wide measurement lock, which the Profile,
Collectives and Sweep tabs hold too (anything beside a measurement would perturb it).
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

from textual.app import App

from gpuplay.core.engine.protocol import SampleBatcher
from gpuplay.core.spec import RunSpec
from gpuplay.tui.messages import RunFinished, RunPhase, RunProgress


class LiveRuns:
    def __init__(self, app: App[Any], engine: Any, telemetry: Any) -> None:
        self.app, self.engine, self.telemetry = app, engine, telemetry  # telemetry: a TelemetryFeed
        self.lock = threading.Lock()  # at most one measurement at any time
        self.cancel = threading.Event()  # the current run's; a new run gets a new one
        self.paused = threading.Event()  # space: the run waits between steps

    def start(self, spec: RunSpec, run_id: int) -> None:
        """Cancel whatever runs (it stops within one step) and measure `spec`."""
        self.cancel.set()
        self.cancel = threading.Event()
        self.paused.clear()
        self._measure(spec, run_id, "live", self.cancel, self.paused)

    def start_paired(self, spec: RunSpec, run_id: int, baseline: RunSpec) -> None:
        """The run on screen again, paired with its baseline: a speedup with an interval."""
        self._measure(spec, run_id, "baseline", self.cancel, self.paused, baseline)

    def stop(self) -> None:
        self.cancel.set()
        self.paused.clear()

    def toggle_pause(self) -> None:
        if self.paused.is_set():
            self.paused.clear()
        else:
            self.paused.set()

    def _measure(
        self,
        spec: RunSpec,
        run_id: int,
        role: str,
        cancel: threading.Event,
        pause: threading.Event,
        paired_with: RunSpec | None = None,
    ) -> None:
        work = partial(self._run, spec, run_id, role, cancel, pause, paired_with)
        self.app.run_worker(work, thread=True, group="measure", exit_on_error=False)

    def _run(
        self,
        spec: RunSpec,
        run_id: int,
        role: str,
        cancel: threading.Event,
        pause: threading.Event,
        paired_with: RunSpec | None,
    ) -> None:
        post = self.app.post_message
        with self.lock:
            if cancel.is_set():
                return
            sink = SampleBatcher(lambda batch: post(RunProgress(run_id, batch)))
            sampler = self.telemetry.sampler
            telemetry = None
            if sampler is not None:  # made from gpuplay.core.measure.telemetry: already imported
                from gpuplay.core.measure.telemetry import RunTelemetry

                telemetry = RunTelemetry(sampler)
            result = self.engine.run(
                spec,
                on_sample=sink.add if role == "live" else None,
                cancel=cancel,
                pause=pause,
                on_phase=lambda ph, _d: post(RunPhase(run_id, ph)),
                telemetry=telemetry,
                paired_with=paired_with,
            )
            sink.flush()
        post(RunFinished(run_id, result, role))
