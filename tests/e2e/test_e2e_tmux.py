"""The real `gpuplay` command in a real terminal (tmux): keys in, screen out."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tmux_server import tmux
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
        tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), script, check=True)

    def screen(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.name, *keys, check=True)

    def wait_for(self, *texts: str, timeout: float = 40.0) -> str:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{texts!r} never appeared together; screen was:\n{self.screen()}")

    def kill(self) -> None:
        tmux("kill-session", "-t", self.name)


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
        t.wait_for("torch cpu", "done", "pairs")  # finished, with its paired speedup ("… pairs with NumPy …")
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


def _app_process(marker: str):
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if any("gpuplay" in c for c in cmd[:2]) and marker in " ".join(cmd):
            return p
    return None


def test_sigterm_restores_the_terminal_and_the_engine_goes_too(tmp_path, env):
    import psutil

    scenarios = tiny_scenarios(tmp_path / "sc")
    t = Tmux(tmp_path, f"--scenarios {scenarios}", 120, 36, env)
    try:
        t.wait_for("done")
        t.keys("b")
        t.wait_for("torch cpu", "done")
        app = _app_process(str(scenarios))
        assert app is not None
        engines = [c for c in app.children(recursive=True) if "gpuplay.core.engine" in " ".join(c.cmdline())]
        assert len(engines) == 1
        engine = engines[0]
        # torch lives in the engine only
        assert "libtorch" in Path(f"/proc/{engine.pid}/maps").read_text()
        assert "libtorch" not in Path(f"/proc/{app.pid}/maps").read_text()
        alt = tmux("display", "-p", "-t", t.name, "#{alternate_on}").stdout.strip()
        assert alt == "1"
        app.send_signal(signal.SIGTERM)
        screen = t.wait_for("TTY-RESTORED", timeout=10)
        assert "EXITED-143" in screen
        alt = tmux("display", "-p", "-t", t.name, "#{alternate_on}").stdout.strip()
        assert alt == "0", "the terminal was left in the alternate screen"
        with pytest.raises(psutil.NoSuchProcess):
            for _ in range(50):
                if engine.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.NoSuchProcess(engine.pid)
                time.sleep(0.1)
    finally:
        t.kill()


def test_q_leaves_no_engine_behind(tmp_path, env):
    """`q` does not wait for the killed engine's teardown (q → shell), and still no
    gpuplay process is left: the engine, killed, is reaped by init once the app has exited."""
    import psutil

    scenarios = tiny_scenarios(tmp_path / "sc")
    t = Tmux(tmp_path, f"--scenarios {scenarios}", 120, 36, env)
    try:
        t.wait_for("done")
        t.keys("b")
        t.wait_for("torch cpu", "done")  # torch loaded in the engine: the slow teardown
        app = _app_process(str(scenarios))
        assert app is not None
        group = [c for c in app.children(recursive=True) if "gpuplay" in " ".join(c.cmdline())]
        assert group
        t.keys("q")
        screen = t.wait_for("TTY-RESTORED", timeout=10)
        assert "EXITED-0" in screen and "Traceback" not in screen
        deadline = time.monotonic() + 5
        left = group
        while left and time.monotonic() < deadline:
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            time.sleep(0.05)
        assert not left, f"left running after q: {[(p.pid, p.cmdline()) for p in left]}"
        deadline = time.monotonic() + 10  # a zombie is init's to reap, in its own time
        while [p for p in group if p.is_running()] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in group if p.is_running()], "an engine zombie was never reaped"
        print(f"zombies reaped {10 - (deadline - time.monotonic()):.2f} s after q")
    finally:
        t.kill()
