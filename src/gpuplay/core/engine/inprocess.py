"""The engine's interface, measuring in the calling process.

For profiling gpuplay itself and for tests that patch the core in-process. It gives up what the
engine process is for (a crash here takes the caller down), so front ends use it only when asked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from gpuplay.core.engine.protocol import probe_data
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

ProbeCallback = Callable[[dict[str, Any], bool], None]


class InProcessEngine:
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
        on_sample: Callable[[str, float], None] | None = None,
        cancel: threading.Event | None = None,
        *,
        pause: threading.Event | None = None,
        on_phase: Callable[[str, str], None] | None = None,
        telemetry: Any = None,
        probe_timeout: float | None = 30.0,
        paired_with: RunSpec | None = None,
    ) -> RunResult:
        from gpuplay.core.devicelock import measure_exclusively
        from gpuplay.core.runner import run
        from gpuplay.core.runner.paired import run_paired

        def measure() -> RunResult:
            if paired_with is not None:
                return run_paired(spec, paired_with, on_sample, cancel, pause=pause, on_phase=on_phase,
                                  telemetry=telemetry, probe_timeout=probe_timeout)  # fmt: skip
            return run(spec, on_sample, cancel, pause=pause, on_phase=on_phase, telemetry=telemetry,
                       probe_timeout=probe_timeout)  # fmt: skip

        return measure_exclusively(spec, measure, cancel, on_phase)  # one per device, as the engine

    def profile(self, spec: RunSpec, steps: int = 5, cancel: threading.Event | None = None) -> dict[str, Any]:
        from gpuplay.core.profile import profile_spec

        return profile_spec(spec, steps=steps)

    def kill(self) -> None:
        return None

    def close(self) -> None:
        return None
