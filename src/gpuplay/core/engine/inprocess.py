"""The engine's interface, measuring in the calling process.

For profiling gpuplay itself and for tests that patch the core in-process. It gives up what the
engine process is for (a crash here takes the caller down), so front ends use it only when asked.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from typing import Any

from gpuplay.core.engine.jobs import profile_job, run_job
from gpuplay.core.engine.messages import ProfileRequest, RunRequest
from gpuplay.core.engine.protocol import Listener, PhaseCallback, ProbeCallback, SampleCallback, probe_data
from gpuplay.core.hw import amd
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

# A poisoned CUDA context here is the caller's own process: no engine to replace.
IN_PROCESS_POISONED = "the CUDA context is poisoned by this error; restart gpuplay (it measured in-process)"


class InProcessEngine:
    """The `Engine` protocol in the calling process: the engine process's jobs (jobs.py), their
    progress handed to the callbacks by the same `Listener` the process client uses."""

    in_process = True

    def __init__(self, name: str = "in-process", on_probe: ProbeCallback | None = None) -> None:
        self.name = name
        self.on_probe = on_probe
        self.probe: dict[str, Any] | None = None
        self.probe_final = False
        self.restarts = 0
        self._started = False
        self._lock = threading.Lock()
        self._probed = threading.Event()
        self._ids = itertools.count(1)

    @property
    def pid(self) -> int:
        return os.getpid()

    def alive(self) -> bool:
        return True

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            # as an engine process starts with it (process.spawn); here torch may be loaded already
            os.environ.update(amd.engine_env(os.environ))
        threading.Thread(target=self._probe, name="gpuplay-inprocess-probe", daemon=True).start()

    def _probe(self) -> None:
        from gpuplay.core.backends import get_backend

        for name in ("numpy", "torch", "cupy"):
            get_backend(name).start_probe()
        for names, final in ((("numpy", "torch"), False), (("numpy", "torch", "cupy"), True)):
            self.probe, self.probe_final = probe_data(names), final
            self._probed.set()
            if self.on_probe is not None:
                self.on_probe(self.probe, final)

    def wait_probe(self, timeout: float | None = None, final: bool = False) -> dict[str, Any] | None:
        self.start()
        self._probed.wait(timeout)
        return self.probe

    def run(
        self,
        spec: RunSpec,
        on_sample: SampleCallback | None = None,
        cancel: threading.Event | None = None,
        *,
        pause: threading.Event | None = None,
        on_phase: PhaseCallback | None = None,
        telemetry: Any = None,
        probe_timeout: float | None = 30.0,
        paired_with: RunSpec | None = None,
        on_baseline: Callable[[RunResult], object] | None = None,
    ) -> RunResult:
        request = RunRequest(next(self._ids), spec, on_sample is not None, paired_with)
        answer = run_job(
            request,
            Listener(on_sample, on_phase).hear,
            cancel or threading.Event(),
            pause or threading.Event(),
            telemetry=telemetry,
            probe_timeout=probe_timeout,
            batch_s=0.0,  # no pipe to spare: every step timing reaches the caller as it is taken
            poisoned_note=IN_PROCESS_POISONED,
        )
        if answer.baseline is not None and on_baseline is not None:
            on_baseline(answer.baseline)
        return answer.result

    def profile(self, spec: RunSpec, steps: int = 5, cancel: threading.Event | None = None) -> dict[str, Any]:
        request = ProfileRequest(next(self._ids), spec, steps)
        answer = profile_job(
            request, Listener().hear, cancel or threading.Event(), poisoned_note=IN_PROCESS_POISONED
        )
        return answer.data

    def kill(self, wait: bool = True) -> None:
        return None

    def close(self) -> None:
        return None
