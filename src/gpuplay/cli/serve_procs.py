"""The processes behind `gpuplay serve`'s sessions: each leads its own process group, dies with the
server (PR_SET_PDEATHSIG where Linux has it), and is terminated, then killed, with everything it
started when its session or the server ends (textual-serve alone leaves them running)."""

from __future__ import annotations

import os
import sys

GRACE_S = 2.0  # SIGTERM first; whatever still runs after this gets SIGKILL


def die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the server process dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_process_groups(pids: list[int], grace_s: float = GRACE_S) -> None:
    """Terminate each process group led by `pids` and every descendant; kill what outlives `grace_s`."""
    import signal

    import psutil

    procs: list[psutil.Process] = []
    for pid in pids:
        try:
            leader = psutil.Process(pid)
            procs += [leader, *leader.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for p in procs:  # descendants that left the group (their own session) too
            try:
                p.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        _gone, procs = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 5.0)
        if not procs:
            return
