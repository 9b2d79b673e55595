"""SIGINT and SIGTERM during a headless measurement: stop at the next step, keep what finished.

The handlers only set the cancel event and remember the signal, so the way out does not
depend on where the measurement runs (this thread, a worker, another process): the
measuring function sees the event, returns, and the command prints what finished and
exits with 128 + the signal number (130 for Ctrl+C, 143 for SIGTERM). A second signal
means "now": it raises `Interrupted` wherever the main thread is waiting.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """A second signal: stop waiting for the running measurement.

    A BaseException, like KeyboardInterrupt, so that no `except Exception` in
    measuring code turns it into a failed result.
    """


class Interruption:
    """Context manager: while active, SIGINT/SIGTERM cancel instead of killing."""

    def __init__(self, cancel: threading.Event | None = None) -> None:
        self.cancel = cancel or threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum if self.signum is not None else 0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.signum is None
        self.signum = self.signum or signum
        self.cancel.set()
        if not first:
            raise Interrupted

    def __enter__(self) -> Interruption:
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, self._handle)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()
        return kind is Interrupted  # the command goes on to print what finished
