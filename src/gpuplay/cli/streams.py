"""The `gpuplay` command started with stdout or stderr closed (`>&-`, `2>&-`, a service manager).

Python then sets `sys.stdout`/`sys.stderr` to None, and the first write fails with an
AttributeError whose traceback has nowhere to go: a run that measured fine exited 1 in silence.
A closed stderr is the user's choice to lose the messages: they go to /dev/null and the run goes
on. A closed stdout has nowhere for the results: its first write raises `StdoutClosed`, which the
group turns into one line on stderr and exit 1; a command that wrote its `--out` file and
nothing to stdout exits 0.
"""

from __future__ import annotations

import errno
import io
import os
import sys


class StdoutClosed(OSError):
    """A write to a stdout that was closed when the command started."""

    def __init__(self) -> None:
        super().__init__(errno.EBADF, "stdout is closed")


class _ClosedStdout(io.TextIOBase):
    def write(self, text: str) -> int:
        raise StdoutClosed

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def stand_in_for_closed() -> None:
    """Replace a closed stderr with /dev/null and a closed stdout with `_ClosedStdout`."""
    if sys.stderr is None:
        try:
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
        except OSError:
            pass
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
