"""What a new user trips over (issue 39): each command as typed, piped, as a script would run it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def gpuplay(
    *args: str, cwd=None, stdin=subprocess.DEVNULL, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TEXTUAL_DRIVER", "COLUMNS")}
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=stdin, env=env)  # fmt: skip


# -- (2) no terminal: say so and name the headless commands, at once ---------------------------
@pytest.mark.parametrize("args", [[], ["demo", "numpy-to-gpu"]])
def test_without_a_terminal_the_front_ends_refuse_at_once(args):
    proc = gpuplay(*args, timeout=30)  # before the fix: one frame, then a spinning core for minutes
    assert proc.returncode == 2, proc.stderr
    assert "needs a terminal" in proc.stderr and "stdin and stdout are not one" in proc.stderr
    for headless in ("gpuplay run", "gpuplay compare", "gpuplay sweep", "gpuplay serve"):
        assert headless in proc.stderr
    assert proc.stdout == ""


def test_a_terminal_on_stdin_only_names_stdout():
    import pty

    leader, follower = pty.openpty()
    try:
        proc = gpuplay(stdin=follower, timeout=30)
    finally:
        os.close(follower)
        os.close(leader)
    assert proc.returncode == 2
    assert "and stdout is not one" in proc.stderr
