"""SIGINT and SIGTERM during a headless measurement: stop at the next step, keep what finished.

The handlers only set the cancel event and remember the signal, so the way out does not
depend on where the measurement runs (this thread, a worker, another process): the
measuring function sees the event, returns, and the command prints what finished and
exits with 128 + the signal number (130 for Ctrl+C, 143 for SIGTERM). A second signal
means "now": it raises `Interrupted` wherever the main thread is waiting.

Outside a measurement a Ctrl+C says the same, one line and exit 130: `exit_at_start` covers the
`gpuplay` command's start (its imports, the early engine's spawn, click's parsing: no Python
code of ours is there to catch a KeyboardInterrupt), and the group's `invoke` the rest.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType, TracebackType

TYPE_CHECKING = False  # typing (~5 ms) is not imported: this module is imported at start-up, first
if TYPE_CHECKING:
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


def say_interrupted(signum: int = signal.SIGINT) -> None:
    """The one line every stop by a signal ends with, on stderr if there is one to write to."""
    try:
        os.write(2, f"interrupted by {signal.Signals(signum).name}\n".encode())
    except OSError:  # stderr closed (`2>&-`): the exit status still says it
        pass


def _exit_now(signum: int, frame: FrameType | None) -> None:
    # Nothing is measured yet and nothing is written: the engine started early is ended, and the
    # process exits at once, wherever the import or the parse was (a KeyboardInterrupt there
    # printed a traceback or click's "Aborted!" with exit 1). An engine caught mid-spawn dies
    # with this process (its parent-death signal and its socket, core/process/lifeline.py).
    try:
        signal.signal(signum, signal.SIG_IGN)  # a second Ctrl+C while the engine is ended: one line
        say_interrupted(signum)
        # Looked up, not imported: the signal may come while that module is being imported
        # (then it has started no engine yet).
        process = sys.modules.get("gpuplay.core.engine.process")
        discard = getattr(process, "discard_early", None)
        if discard is not None:
            discard()
    finally:
        os._exit(128 + signum)


def exit_at_start() -> None:
    """Until the command runs (`at_command`), Ctrl+C ends the process: one line, exit 130."""
    signal.signal(signal.SIGINT, _exit_now)


def at_command() -> None:
    """The command runs: Ctrl+C is a KeyboardInterrupt again, which the commands that wait on
    something (monitor, demo) catch, and the group turns into the same line and 130."""
    if signal.getsignal(signal.SIGINT) is _exit_now:
        signal.signal(signal.SIGINT, signal.default_int_handler)
