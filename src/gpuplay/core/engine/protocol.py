"""What travels between the client and the engine process: plain tuples of plain data.

Client → engine: ("run", run_id, spec_dict, live, baseline_dict | None), ("cancel", run_id), ("pause", run_id, bool),
("probe",), ("shutdown",).
Engine → client: ("ready", pid), ("probe", data, final), ("phase", run_id, name),
("samples", run_id, [(phase, seconds), ...]), ("result", run_id, result_dict).

A run with a baseline spec times both in interleaved pairs in the engine (runner.paired) and
answers the run's result with its `speedup` filled in: both sides in one process, alternating.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpuplay.core.backends import all_backends, get_backend
from gpuplay.core.backends.base import Availability, DeviceInfo

SAMPLE_BATCH_S = 0.1  # step timings reach the client at most ~10 times a second


class SampleBatcher:
    """Collects step timings and hands them on in batches, at most ~10 times a second.

    Used on both sides: the engine batches what it sends, the app what it posts to its UI thread.
    """

    def __init__(self, deliver: Callable[[list[tuple[str, float]]], object]) -> None:
        self.deliver = deliver
        self.pending: list[tuple[str, float]] = []
        self.last = time.monotonic()

    def add(self, phase: str, dt: float) -> None:
        self.pending.append((phase, dt))
        now = time.monotonic()
        if now - self.last >= SAMPLE_BATCH_S:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.deliver(batch)
        self.last = now or time.monotonic()


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
