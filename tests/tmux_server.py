"""The tests' own tmux server: `tmux(...)` runs a tmux command on it.

Not the default server: by default a tmux server exits when its last session is killed, and a
`new-session` that reaches it while it exits is lost with it ("server exited unexpectedly") — a
test that starts its terminal right after another test closed its own would fail for tmux's sake.
This server is started with `exit-empty off` on first use and killed when the tests end. Watch a
test's terminal with `tmux -L gpuplay-tests-PID attach`.
"""

from __future__ import annotations

import atexit
import os
import subprocess

SOCKET = f"gpuplay-tests-{os.getpid()}"
_started = False


def tmux(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    global _started
    if not _started:
        _started = True
        subprocess.run(["tmux", "-L", SOCKET, "start-server", ";", "set-option", "-s", "exit-empty", "off"],
                       capture_output=True, check=False)  # fmt: skip
        atexit.register(
            subprocess.run, ["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False
        )
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=check)
