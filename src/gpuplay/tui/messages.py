"""Messages the worker threads post to the app. Workers never touch widgets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

from gpuplay.core.result import RunResult

if TYPE_CHECKING:  # the telemetry (psutil) is imported after the first frame (tabs/telemetry.py)
    from gpuplay.core.measure.telemetry import Snapshot


class RunProgress(Message):
    """A batch of step timings (coalesced: at most ~10 messages a second)."""

    def __init__(self, run_id: int, samples: list[tuple[str, float]]) -> None:
        super().__init__()
        self.run_id = run_id
        self.samples = samples


class RunPhase(Message):
    def __init__(self, run_id: int, phase: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.phase = phase


class RunFinished(Message):
    def __init__(self, run_id: int, result: RunResult, role: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.result = result
        self.role = role  # "live" or "baseline"


class ProbesDone(Message):
    """Backends probed in the background: NumPy and PyTorch first (final=False), then CuPy."""

    def __init__(self, final: bool, data: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.final = final
        self.data = data  # the engine's probe answer, adopted by the UI thread


class TelemetryTick(Message):
    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot
