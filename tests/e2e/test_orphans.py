"""No process outlives a killed front end: the engine and whatever the measured code started.

A real code file whose step starts `sleep 300`, a real `gpuplay run`, and the front end then
ended the ways a user ends it (SIGKILL, SIGHUP as a closed terminal sends it): the engine ends
its own process group when its connection drops, so the `sleep` goes with it. The process
table is read before and after.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.tmux_server import tmux

pytestmark = pytest.mark.slow

GPUPLAY = [sys.executable, "-m", "gpuplay"]

SPAWNS_A_SLEEP = """
import os, subprocess, time
_kids = []

def inputs(rng, n=64):
    return rng.standard_normal(n)

def step(xp, x):
    if not _kids:
        _kids.append(subprocess.Popen(["sleep", "300"]).pid)
        with open(os.environ["PIDFILE"], "w") as f:
            f.write(f"{os.getpid()} {_kids[0]}\\n")
    time.sleep(0.01)
    return x * 2
"""

# A double-fork daemon: the child calls setsid() (a new session and group: a group kill misses
# it), forks `sleep 300` and exits, so the sleep is re-parented away from the engine's tree.
SPAWNS_A_DAEMON = """
import os, time
_kids = []

def inputs(rng, n=64):
    return rng.standard_normal(n)

def step(xp, x):
    if not _kids:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", "300"])
            os.write(w, b"ok")
            os._exit(0)
        os.waitpid(pid, 0)
        os.read(r, 2)
        time.sleep(0.2)  # the grandchild has exec'd by now
        me = os.getpid()
        import psutil
        daemon = next(p.pid for p in psutil.process_iter(["cmdline"])
                      if (p.info["cmdline"] or [])[:2] == ["sleep", "300"] and p.pid not in _kids
                      and p.ppid() in (me, 1) and os.getsid(p.pid) != os.getsid(me))
        _kids.append(daemon)
        with open(os.environ["PIDFILE"], "w") as f:
            f.write(f"{me} {daemon}\\n")
    time.sleep(0.01)
    return x * 2
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def sleeps_300(pidfile: Path) -> set[int]:
    """Every `sleep 300` in the process table started under this test's PIDFILE (the measured
    code's descendants inherit it): another worker's test starts `sleep 300`s of its own, which
    read as this test's leftovers when every `sleep 300` was counted."""
    found = set()
    for p in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if (p.info["cmdline"] or [])[:2] == ["sleep", "300"] and p.environ().get("PIDFILE") == str(
                pidfile
            ):
                found.add(p.pid)
    return found


def wait_for_pids(path: Path, proc: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and (text := path.read_text()).endswith("\n"):
            engine, child = map(int, text.split())
            return engine, child
        if proc.poll() is not None:
            pytest.fail(f"gpuplay run ended early: {proc.communicate()}")
        time.sleep(0.05)
    pytest.fail(f"{path} never appeared")


@pytest.mark.parametrize(
    ("sig", "user_code"),
    [(signal.SIGKILL, SPAWNS_A_SLEEP), (signal.SIGHUP, SPAWNS_A_SLEEP),
     (signal.SIGKILL, SPAWNS_A_DAEMON), (signal.SIGHUP, SPAWNS_A_DAEMON)],
    ids=["sigkill-child", "sighup-child", "sigkill-setsid-daemon", "sighup-setsid-daemon"],
)  # fmt: skip
def test_a_killed_front_end_leaves_no_engine_and_no_child_of_the_measured_code(tmp_path, sig, user_code):
    code = tmp_path / "spawner.py"
    code.write_text(textwrap.dedent(user_code))
    pidfile = tmp_path / "pids"
    before = sleeps_300(pidfile)
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1",
           "PIDFILE": str(pidfile)}  # fmt: skip
    front = subprocess.Popen(
        [*GPUPLAY, "run", str(code), "--budget", "120", "--max-step", "5"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # as a terminal's job: nothing else in this group
    )  # fmt: skip
    engine, child = wait_for_pids(pidfile, front)
    try:
        assert alive(engine) and alive(child)
        assert psutil.Process(engine).ppid() == front.pid
        if user_code is SPAWNS_A_DAEMON:  # it left the engine's session and group
            assert os.getsid(child) != os.getsid(engine) and os.getpgid(child) != os.getpgid(engine)
        os.kill(front.pid, sig)  # the front end only, as a user's `kill -9 PID` or a closed terminal
        front.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while (alive(engine) or alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(engine), "the engine outlived its front end"
        assert not alive(child), "the measured code's `sleep 300` outlived the front end"
        assert sleeps_300(pidfile) - before == set()
    finally:
        front.kill()
        for pid in (engine, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


DRIVER = """
import os, sys, threading, time
from gpuplay.core.engine import EngineClient

client = EngineClient()
# Started from a worker thread that ends at once: the engine must not die with that thread.
t = threading.Thread(target=client.start)
t.start()
t.join()
if os.fork() == 0:  # a child that keeps the front end's end of the socket open: no EOF comes
    time.sleep(300)
    os._exit(0)
print(client.pid, flush=True)
time.sleep(300)
"""


def test_the_parent_death_signal_ends_the_engine_when_no_eof_comes(tmp_path):
    """The backstop: a fork of the front end holds its socket, so the engine sees no EOF when the
    front end is killed; PR_SET_PDEATHSIG (fired from the long-lived spawner thread, not the
    worker that asked) still ends it."""
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state")}
    front = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE, text=True,
                             start_new_session=True)  # fmt: skip
    fork = engine = None
    try:
        assert front.stdout is not None
        engine = int(front.stdout.readline())
        fork = next(p.pid for p in psutil.Process(front.pid).children() if p.pid != engine)
        time.sleep(1.0)  # the worker thread that asked for the engine has ended long since
        assert alive(engine), "the engine died with the thread that started it"
        os.kill(front.pid, signal.SIGKILL)
        front.wait(10)
        deadline = time.monotonic() + 10
        while alive(engine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(engine), "the engine outlived its front end"
    finally:
        front.kill()
        for pid in (fork, engine):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.parametrize("how", ["SIGKILL", "terminal closed"])
def test_the_playground_killed_in_a_real_terminal_leaves_nothing(tmp_path, how):
    """The TUI in tmux measuring a code file whose step started `sleep 300`; then `kill -9` of the
    app, or the terminal closed (tmux kill-session): no engine and no `sleep` left."""
    code = tmp_path / "spawner.py"
    code.write_text(textwrap.dedent(SPAWNS_A_SLEEP))
    pidfile = tmp_path / "pids"
    (tmp_path / "cfg").mkdir()
    before = sleeps_300(pidfile)
    env = {"GPUPLAY_STATE_DIR": tmp_path / "state", "GPUPLAY_CONFIG_DIR": tmp_path / "cfg",
           "OMP_NUM_THREADS": "1", "PIDFILE": pidfile, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # fmt: skip
    exports = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
    session = f"gpuplay-orphans-{uuid.uuid4().hex[:8]}"
    script = (
        f"env {exports} {shlex.quote(sys.executable)} -m gpuplay --code {shlex.quote(str(code))}; sleep 60"
    )
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "36", script, check=True)
    engine = child = app = None
    try:
        deadline = time.monotonic() + 120
        while not (pidfile.exists() and pidfile.read_text().endswith("\n")) and time.monotonic() < deadline:
            time.sleep(0.1)
        engine, child = map(int, pidfile.read_text().split())
        app = psutil.Process(engine).ppid()
        assert "gpuplay" in " ".join(psutil.Process(app).cmdline())
        if how == "SIGKILL":
            os.kill(app, signal.SIGKILL)
        else:
            tmux("kill-session", "-t", session)
        deadline = time.monotonic() + 15
        while (alive(app) or alive(engine) or alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(engine), "the engine outlived the app"
        assert not alive(app), f"the app outlived the terminal: {psutil.Process(app).status()}"
        assert not alive(child), "the measured code's `sleep 300` outlived the app"
        assert sleeps_300(pidfile) - before == set()
    finally:
        tmux("kill-session", "-t", session)
        for pid in (app, engine, child):
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(pid, signal.SIGKILL)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["finishes", "sigint", "sigterm"])
def test_a_setsid_daemon_of_the_measured_code_ends_with_the_run(tmp_path, how):
    """A double-fork daemon (setsid'd: out of the engine's group, re-parented away from it) is
    ended when the run ends normally or by Ctrl+C/SIGTERM, not only when the front end is killed:
    the engine is its subreaper and ends its descendants on the way out."""
    code = tmp_path / "daemon.py"
    code.write_text(textwrap.dedent(SPAWNS_A_DAEMON))
    pidfile = tmp_path / "pids"
    before = sleeps_300(pidfile)
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1",
           "PIDFILE": str(pidfile)}  # fmt: skip
    budget = "2" if how == "finishes" else "120"
    front = subprocess.Popen(
        [*GPUPLAY, "run", str(code), "--budget", budget, "--max-step", "5"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    engine, child = wait_for_pids(pidfile, front)
    try:
        assert alive(child) and os.getsid(child) != os.getsid(engine)
        if how != "finishes":
            os.kill(front.pid, signal.SIGINT if how == "sigint" else signal.SIGTERM)
        front.communicate(timeout=120)
        deadline = time.monotonic() + 10
        while (alive(engine) or alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(engine), "the engine outlived its front end"
        assert not alive(child), f"the measured code's setsid'd `sleep 300` outlived a run that {how}"
        assert sleeps_300(pidfile) - before == set()
    finally:
        front.kill()
        for pid in (engine, child):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
