"""GPUPLAY_TRACE=1: when each step of a command happened, in the front end and in the engine.

One line per mark on the front end's stderr, the engine's lines among them (the engine gets a
duplicate of the front end's stderr: its own stderr is the engine log):

    gpuplay trace  0.4120 s  cpu 0.3010 s  engine  phase timed

The times are seconds since the front end's process started (the kernel's start time, to its
10 ms tick) on the system-wide monotonic clock, so both processes' lines read on one timeline;
`cpu` is the marking process's own CPU time. Off (the default), a mark is one test of a module
flag: the timed loop never marks, and nothing is imported or opened.
"""

from __future__ import annotations

import os
import time

ENV = "GPUPLAY_TRACE"
FD_ENV = "GPUPLAY_TRACE_FD"  # the engine's copy of the front end's stderr
ZERO_ENV = "GPUPLAY_TRACE_ZERO"  # the front end's start on the monotonic clock, for the engine

ENABLED = os.environ.get(ENV, "") not in ("", "0")
_fd: int | None = None
_zero: float | None = None
_who = "front end"


def _process_start() -> float:
    """This process's start on the monotonic clock, from /proc (its start time in clock ticks
    since boot); now if it cannot be read. Boot time counts suspend, the monotonic clock not."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return time.monotonic() - (time.clock_gettime(time.CLOCK_BOOTTIME) - start)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()


def _setup() -> None:
    global _fd, _zero, _who
    given = os.environ.get(FD_ENV)
    if given is not None:  # the engine: the front end's stderr and zero
        _who = "engine"
        try:
            _fd = int(given)
            _zero = float(os.environ.get(ZERO_ENV, ""))
            os.set_inheritable(_fd, False)  # nothing the measured code starts gets it
        except (ValueError, OSError):  # a trace must never stop the engine: no lines, then
            _fd, _zero = None, _process_start()
        mark("process started", at=_process_start())
        return
    _fd, _zero = 2, _process_start()
    mark("process started", at=_zero)
    import atexit

    atexit.register(mark, "exit")  # registered first: runs after every other exit handler


def mark(what: str, at: float | None = None) -> None:
    """Write one trace line (when GPUPLAY_TRACE is set); `at`: a monotonic time other than now."""
    if not ENABLED:
        return
    if _zero is None:
        _setup()
    if _fd is None or _zero is None:
        return
    from gpuplay.core.storage.safetext import visible  # a phase's words may carry another process's name

    what = visible(what, one_line=True)
    t = (time.monotonic() if at is None else at) - _zero
    cpu = time.process_time() if at is None else 0.0  # a past moment's CPU time is not known
    line = f"gpuplay trace {t:8.4f} s  cpu {cpu:7.4f} s  {_who:9}  {what}\n"
    try:
        os.write(_fd, line.encode(errors="replace"))
    except OSError:
        pass


def child_fds() -> tuple[tuple[int, ...], dict[str, str]]:
    """What a child engine needs to write its marks here: fds to pass (the caller closes them
    once the child is started), variables to add to its environment."""
    if not ENABLED:
        return (), {}
    if _zero is None:
        _setup()
    fd = os.dup(2)
    return (fd,), {FD_ENV: str(fd), ZERO_ENV: repr(_zero)}
