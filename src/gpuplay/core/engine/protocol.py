"""The engine's interface as front ends see it, and the plain data it shares with them.

`Engine` is what the app and the headless commands call: `EngineClient` (a process of its own) and
`InProcessEngine` (the calling process) both implement it. `Listener` hands a run's progress
messages (gpuplay.core.engine.messages) to the caller's callbacks, the same way for both. Probe
answers travel as plain data (`probe_data` in the engine, `adopt_probe` in the front end).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gpuplay.core.backends import all_backends, get_backend
from gpuplay.core.backends.base import Availability, DeviceInfo
from gpuplay.core.engine.messages import Phase, Progress, Samples

if TYPE_CHECKING:
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

SAMPLE_BATCH_S = 0.1  # step timings reach the client at most ~10 times a second


class SampleBatcher:
    """Collects step timings and hands them on in batches, at most ~10 times a second.

    Used on both sides: the engine batches what it sends, the app what it posts to its UI thread.
    """

    def __init__(
        self, deliver: Callable[[list[tuple[str, float]]], object], interval_s: float = SAMPLE_BATCH_S
    ) -> None:
        self.deliver = deliver
        self.interval_s = interval_s  # 0: every timing handed on at once
        self.pending: list[tuple[str, float]] = []
        self.last = time.monotonic()

    def add(self, phase: str, dt: float) -> None:
        self.pending.append((phase, dt))
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.deliver(batch)
        self.last = now or time.monotonic()


SampleCallback = Callable[[str, float], object]
PhaseCallback = Callable[[str, str], object]
ProbeCallback = Callable[[dict[str, Any], bool], None]


@dataclass(frozen=True)
class Listener:
    """A caller's callbacks for a run's progress: `hear` is the one place progress is dispatched."""

    on_sample: SampleCallback | None = None
    on_phase: PhaseCallback | None = None

    def hear(self, event: Progress) -> None:
        if isinstance(event, Samples):
            if self.on_sample is not None:
                for phase, dt in event.samples:
                    self.on_sample(phase, dt)
        elif isinstance(event, Phase) and self.on_phase is not None:
            self.on_phase(event.name, "")


class Engine(Protocol):
    """What measures for a front end. Never raises for what a user can cause, nor for an engine
    that dies: the result says what happened."""

    name: str
    on_probe: ProbeCallback | None
    probe: dict[str, Any] | None  # the latest probe answer (final or not)
    probe_final: bool
    restarts: int  # engines replaced (killed after a cancel, died, timed out)

    @property
    def in_process(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    def alive(self) -> bool: ...

    def start(self) -> None: ...

    def wait_probe(self, timeout: float | None = None, final: bool = False) -> dict[str, Any] | None: ...

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
    ) -> RunResult: ...

    def profile(
        self, spec: RunSpec, steps: int = 5, cancel: threading.Event | None = None
    ) -> dict[str, Any]: ...

    def kill(self, wait: bool = True) -> None: ...

    def close(self) -> None: ...


def probe_data(names: tuple[str, ...], timeout: float | None = None) -> dict[str, Any]:
    """Availability, devices and versions of the named backends, as plain data (engine side)."""
    out: dict[str, Any] = {}
    for name in names:
        b = get_backend(name)
        avail, devices = b.probe(timeout)
        entry: dict[str, Any] = {
            "ok": avail.ok,
            "reason": avail.reason,
            "pending": avail.pending,
            "devices": [
                {"id": d.id, "name": d.name, "memory_bytes": d.memory_bytes, "extra": d.extra}
                for d in devices
            ],
            "version": b.version() if avail.ok else None,
        }
        if name == "torch" and avail.ok:
            entry["cuda_reason"] = b.cuda_reason()  # type: ignore[attr-defined]
        out[name] = entry
    return out


def adopt_probe(data: dict[str, Any]) -> None:
    """Install the engine's probe answers in this process's backends (client side): the planner
    and the controls then read them without this process importing torch or CuPy."""
    for name, entry in data.items():
        devices = [
            DeviceInfo(d["id"], d["name"], d["memory_bytes"], d.get("extra") or {}) for d in entry["devices"]
        ]
        get_backend(name).adopt_probe(
            Availability(entry["ok"], entry["reason"], entry.get("pending", False)),
            devices,
            {k: entry[k] for k in ("version", "cuda_reason") if k in entry},
        )


def await_engine_probe() -> None:
    """Mark every backend as answered by the engine, pending until its probe arrives."""
    for b in all_backends():
        b.adopt_probe(Availability(False, "probing in the engine…", pending=True), [], {})


def forget_engine_probe() -> None:
    for b in all_backends():
        b.forget_adopted()
