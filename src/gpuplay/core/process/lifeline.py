"""Child processes that cannot outlive the process that started them, however it ends.

Two mechanisms, because neither is enough alone:

- `end_group_and_exit`: the engine leads its own process group (started with
  `process_group=0`); when its connection to the front end drops (the front end was killed,
  its terminal closed) it ends that group — whatever the measured code started goes with it —
  and itself. The front end's own cleanup (`EngineClient._reap`) does the same, but never runs
  when the front end dies by SIGKILL.
- `adopt_orphans`: the engine is a child subreaper, so a double-fork daemon of the measured
  code (setsid'd: out of the group) is re-parented to the engine, not init, and still found
  among its descendants.
- `spawn(..., die_with_parent=True)`: Linux's PR_SET_PDEATHSIG as a backstop: the child gets
  SIGTERM when its parent dies. The kernel ties it to the *thread* that forked the child, not
  the process, so a child started from a worker thread would be signalled when that worker
  ends. `spawn` therefore forks from one thread that lives as long as the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

TYPE_CHECKING = False  # typing (5-9 ms) is not imported: the entry imports this before its spawn
if TYPE_CHECKING:
    from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _death_signal_setter(sig: int) -> Callable[[], None] | None:
    """A preexec_fn that asks for `sig` when the parent dies. Resolved before the fork: between
    fork and exec the child may only call what needs no lock (no import, no dlopen)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl took effect: it never fires
            os._exit(1)

    return preexec


class _Spawner:
    """One daemon thread that forks every child asked for: it lives until the process exits, so a
    parent-death signal fires when the process dies, not when the caller's thread ends."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue[tuple[bool, Any]]]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="gpuplay-spawner", daemon=True)
                self._thread.start()
        answer: queue.Queue[tuple[bool, Any]] = queue.Queue(1)
        self._jobs.put((fn, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def _loop(self) -> None:
        while True:
            fn, answer = self._jobs.get()
            try:
                answer.put((True, fn()))
            except BaseException as exc:  # handed back to the caller, raised in its thread
                answer.put((False, exc))


_spawner = _Spawner()


def spawn(argv: list[str], *, die_with_parent: bool = True, **popen_kw: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(argv, **popen_kw)`, forked from the long-lived spawner thread; with
    `die_with_parent`, the child gets SIGTERM when this process dies (Linux; elsewhere nothing)."""
    preexec = _death_signal_setter(signal.SIGTERM) if die_with_parent else None
    if preexec is not None:
        popen_kw["preexec_fn"] = preexec
    return _spawner.call(lambda: subprocess.Popen(argv, **popen_kw))


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (Linux 3.4+): a process the measured
    code starts that double-forks, and calls setsid() to leave the group, is re-parented here
    instead of to init, so `end_group_and_exit` still finds it among this process's children.
    The cost: such an orphan that exits stays a zombie until this process exits (reaping it here
    would take the exit status from user code that waits for its own children). False where it
    is not available."""
    prctl = _prctl()
    if prctl is None:
        return False
    return bool(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0)


def kill_descendants(pid: int) -> None:
    """SIGKILL every descendant of `pid`: those that left its process group (setsid) too, which a
    group kill misses. With `adopt_orphans` in `pid`, a double-forked daemon is among them."""
    if pid == os.getpid() and not _has_children():
        return  # nothing to find, nor psutil to import (~10 ms of an engine's exit)
    with contextlib.suppress(Exception):
        import psutil

        for child in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()


def _has_children() -> bool:
    """Whether this process has a child, running or exited and not yet reaped (none reaped here:
    WNOWAIT). A process with no child has no descendant: one whose parent ended would have been
    re-parented to this one, its subreaper (`adopt_orphans`)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid here: look
        return True
    return True


def end_group_and_exit(code: int = 0) -> None:
    """End every process this one started — its descendants, and its process group if it leads
    one — then itself. For the engine, once its front end is gone: nothing it or the measured
    code started may be left running."""
    me = os.getpid()
    kill_descendants(me)
    if os.getpgrp() == me:
        # The group's SIGKILL takes this process too; os._exit follows in case it is not at once.
        with contextlib.suppress(OSError):
            os.killpg(me, signal.SIGKILL)
    os._exit(code)


def end_group_on_sigterm() -> None:
    """SIGTERM (the parent-death signal `spawn` asks for, or a user's `kill`) ends the group too."""
    signal.signal(signal.SIGTERM, lambda _sig, _frame: end_group_and_exit(143))
