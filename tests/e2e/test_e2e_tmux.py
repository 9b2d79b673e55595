"""The real `gpuplay` command in a real terminal (tmux): keys in, screen out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tui_helpers import tiny_scenarios

pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"), pytest.mark.slow]


def gpuplay_exe() -> str:
    exe = Path(sys.executable).parent / "gpuplay"
    return str(exe) if exe.exists() else (shutil.which("gpuplay") or "gpuplay")


class Tmux:
    def __init__(self, cwd: Path, args: str, width: int, height: int, env: dict[str, str]) -> None:
        self.name = f"gpuplay-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        # Record the terminal's settings before and after, to prove the app restored them.
        script = (
            f"cd {cwd} && stty -g > tty.before; env {exports} {gpuplay_exe()} {args}; echo EXITED-$?; "
            "stty -g > tty.after; cmp -s tty.before tty.after && echo TTY-RESTORED; sleep 60"
        )
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), script],
            check=True,
        )

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        ).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait_for(self, *texts: str, timeout: float = 40.0) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{texts!r} never appeared together; screen was:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def env(tmp_path):
    return {
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "GPUPLAY_CONFIG_DIR": str(tmp_path / "cfg"),
        "OMP_NUM_THREADS": "1",
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
    }


@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
def test_real_terminal_session(tmp_path, env, size):
    scenarios = tiny_scenarios(tmp_path / "sc")
    t = Tmux(tmp_path, f"--scenarios {scenarios}", *size, env)
    try:
        screen = t.wait_for("done")  # probes finished and the first measurement ran
        assert "numpy cpu" in screen
        t.keys("b")
        t.wait_for("torch cpu", "done", "float32:")  # finished, with its speedup
        t.keys("3")
        t.wait_for("def matmul(xp, a, b):")
        t.keys("q")
        screen = t.wait_for("TTY-RESTORED")
        assert "EXITED-0" in screen and "Traceback" not in screen
    finally:
        t.kill()
    logs = list((tmp_path / "state" / "sessions").glob("*.jsonl"))
    assert logs and logs[0].read_text().count("\n") >= 2  # both measurements reached the disk


def test_ctrl_c_during_a_run_restores_the_terminal(tmp_path, env):
    t = Tmux(tmp_path, "", 100, 30, env)
    try:
        t.wait_for("timed")  # the first measurement's timed phase is running
        t.keys("C-c")
        screen = t.wait_for("TTY-RESTORED")
        assert "scenarios" not in screen  # the alternate screen is gone
        assert "Traceback" not in screen
    finally:
        t.kill()
