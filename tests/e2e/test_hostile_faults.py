"""Hostile faults from measured code, as a user produces them: real files, real child processes.

A user's step that starts a grandchild and then loses its engine, that spins forever, that
calls os._exit(3), that prints without end: each ends as a failed result, promptly, with no
process left behind, and the next measurement works.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from gpuplay.core.engine import EngineClient
from gpuplay.core.engine import client as engine_client
from gpuplay.core.spec import RunSpec

pytestmark = pytest.mark.slow

GPUPLAY = [sys.executable, "-m", "gpuplay"]


def code_file(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(
        f'"""{name}."""\n'
        "def inputs(rng, n=64):\n    return rng.standard_normal(n)\n\n" + textwrap.dedent(body)
    )
    return path


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1", **extra}


def wait_for_file(path: Path, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            return text
        time.sleep(0.05)
    pytest.fail(f"{path} never appeared")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


GRANDCHILD = """
import os, subprocess, time
_kids = []

def step(xp, x):
    if not _kids:
        if os.environ["HOW"] == "fork":
            pid = os.fork()  # a fork keeps every fd, inheritable or not
            if pid == 0:
                time.sleep(1000)
                os._exit(0)
        else:
            pid = subprocess.Popen(["sleep", "1000"], close_fds=False).pid
        _kids.append(pid)
        with open(os.environ["PIDFILE"], "w") as f:
            f.write(f"{os.getpid()} {pid}\\n")
    time.sleep(0.02)
    return x * 2
"""


@pytest.mark.parametrize("how", ["popen", "fork"])
def test_engine_killed_while_a_grandchild_holds_its_socket(tmp_path, how):
    """The CLI reports the engine's death at once, and the grandchild does not outlive it."""
    code = code_file(tmp_path, "grandchild", GRANDCHILD)
    pidfile = tmp_path / "pids"
    proc = subprocess.Popen(
        [*GPUPLAY, "run", str(code), "--budget", "60", "--max-step", "5"],
        env=env_for(tmp_path, PIDFILE=str(pidfile), HOW=how),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    engine_pid, grandchild = map(int, wait_for_file(pidfile).split())
    try:
        os.kill(engine_pid, signal.SIGKILL)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10, "the engine's death took too long to notice"
        assert proc.returncode == 1
        assert "SIGKILL" in err and "Traceback" not in err
        deadline = time.monotonic() + 5
        while not gone(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(grandchild), "the measured code's child outlived its engine"
    finally:
        proc.kill()
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)


def test_client_stop_ends_what_the_measured_code_started(tmp_path, monkeypatch):
    """close() takes the engine's whole process group, not the engine alone."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    code = code_file(tmp_path, "grandchild", GRANDCHILD)
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("PIDFILE", str(pidfile))
    monkeypatch.setenv("HOW", "popen")
    client = EngineClient()
    try:
        r = client.run(RunSpec.make(f"code:{code}", {}, budget_s=0.1, repeat=5))
        assert r.status == "ok", r.message
        _, grandchild = map(int, wait_for_file(pidfile).split())
        assert not gone(grandchild)
    finally:
        client.close()
    deadline = time.monotonic() + 5
    while not gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(grandchild)


def test_an_endless_step_is_stopped_and_the_next_run_works(tmp_path, monkeypatch):
    """`while True: pass` in a step under --max-step ends as "stopped: a step ran past its limit" (no hang)."""
    monkeypatch.setattr(engine_client, "WATCHDOG_GRACE_S", 1.0)
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    spin = code_file(tmp_path, "spin", "def step(xp, x):\n    while True:\n        pass\n")
    client = EngineClient()
    try:
        assert client.wait_probe(120) is not None
        t0 = time.monotonic()
        r = client.run(RunSpec.make(f"code:{spin}", {}, max_step_s=0.5, budget_s=0.2))
        took = time.monotonic() - t0
        assert r.status == "failed" and r.failure == "step-timeout"
        assert r.message.startswith("stopped: a step ran past its limit of 0.5 s (--max-step)"), r.message
        assert took < 30
        ok = client.run(RunSpec.make("elementwise", {"n": 1000}, budget_s=0.1))
        assert ok.status == "ok", ok.message
    finally:
        client.close()


def test_cli_endless_step_under_max_step_ends(tmp_path):
    spin = code_file(tmp_path, "spin", "def step(xp, x):\n    while True:\n        pass\n")
    res = subprocess.run(
        [*GPUPLAY, "run", str(spin), "--max-step", "0.5"],
        env=env_for(tmp_path), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 1
    assert "stopped: a step ran past its limit of 0.5 s" in res.stderr and "Traceback" not in res.stderr


def test_os_exit_3_is_not_called_a_cuda_error(tmp_path):
    code = code_file(tmp_path, "exit3", "import os\n\ndef step(xp, x):\n    os._exit(3)\n")
    res = subprocess.run(
        [*GPUPLAY, "run", str(code)], env=env_for(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1
    assert "exited with code 3" in res.stderr
    assert "CUDA" not in res.stderr


def test_a_chatty_step_cannot_grow_the_engine_log_without_bound(tmp_path, monkeypatch):
    """A step printing 2 MiB a call, 50 MiB in all: engine.log ends at its cap (4 MiB here)."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(engine_client, "LOG_CAP_BYTES", 4 * 2**20, raising=False)
    chatty = code_file(
        tmp_path, "chatty",
        "import os, time\n\ndef step(xp, x):\n    os.write(1, b'x' * 2**21 + b'\\n')\n    time.sleep(0.2)\n"
        "    return x * 2\n",
    )  # fmt: skip
    client = EngineClient()
    try:
        r = client.run(RunSpec.make(f"code:{chatty}", {}, warmup=0, repeat=25))
        assert r.status == "ok", r.message
        log = client.log_path
        assert log is not None
        assert log.stat().st_size <= 4 * 2**20, f"engine.log grew to {log.stat().st_size / 2**20:.0f} MiB"
    finally:
        client.close()
