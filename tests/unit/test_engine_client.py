"""The front end's engine client (core/engine/client.py): release, close and reaping of the engine
process and its group."""

from __future__ import annotations

import os  # noqa: E402
import subprocess  # noqa: E402
import sys
import time

import pytest

from gpuplay.core.engine import client as engine_client  # noqa: E402
from gpuplay.core.storage import installed
from tests.process_helpers import run_python as _python


def test_a_released_engine_is_group_killed_before_it_is_reaped(monkeypatch):
    """`_reap` says the group is killed before the engine is reaped, so its pid (the group's id)
    cannot have been reused. After `release`, the engine exits by itself and `close` (at exit)
    reaps it in `alive()` (Popen.poll) before `os.killpg(pid)`: the SIGKILL then goes to a group
    id that is free again, as often as every NumPy `run` now."""
    from gpuplay.core.engine import client as client_mod
    from gpuplay.core.engine.client import EngineClient
    from gpuplay.core.spec import RunSpec

    c = EngineClient(backends=("numpy",))
    assert c.run(RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=1)).status == "ok"
    c.release()
    deadline = time.monotonic() + 10
    while not c._engine_gone() and time.monotonic() < deadline:  # the engine ends on its own
        time.sleep(0.01)
    assert c._engine_gone()
    proc = c._proc
    reaped_at_killpg = []
    real = client_mod.os.killpg

    def killpg(pgid, sig):
        reaped_at_killpg.append(proc.returncode is not None)
        return real(pgid, sig)

    monkeypatch.setattr(client_mod.os, "killpg", killpg)
    c.close(wait=False)
    assert reaped_at_killpg == [False], "the engine was reaped before its group was killed"


@pytest.fixture
def fresh_lookups_and_path(monkeypatch):
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()


@pytest.mark.usefixtures("fresh_lookups_and_path")
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Linux pidfd")
def test_wait_gone_with_a_pidfd_numbered_past_select_s_limit_still_waits(monkeypatch):
    """A command holding over 1024 descriptors (a raised RLIMIT_NOFILE, many result files open)
    gets a pidfd select.select cannot take: ValueError, which escaped `_reap` and left the engine
    and its group unkilled at exit."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    real = os.pidfd_open
    high = []

    def pidfd_open(pid, flags=0):
        fd = real(pid, flags)
        hi = os.dup2(fd, 1500)
        os.close(fd)
        high.append(hi)
        return hi

    monkeypatch.setattr(os, "pidfd_open", pidfd_open)
    c = engine_client.EngineClient()
    c._proc = proc
    try:
        t0 = time.monotonic()
        c._wait_gone(2.0)  # not ValueError: filedescriptor out of range in select()
        assert high and proc.poll() is not None and time.monotonic() - t0 < 1.5
    finally:
        c._proc = None
        proc.kill()
        proc.wait()


@pytest.mark.usefixtures("fresh_lookups_and_path")
def test_a_released_engine_that_was_never_asked_is_not_waited_for_at_close():
    """release() on an engine that was sent nothing (`_asked` False: a command stopped before its
    request) sends no Shutdown but marks it released; close() then waited WAIT_POLITELY_S (0.2 s)
    for an engine that had not been told to end, before killing it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    c = engine_client.EngineClient()
    c._proc = proc
    try:
        c.release()
        t0 = time.monotonic()
        c.close(wait=False)
        took = time.monotonic() - t0
        assert proc.poll() is not None
        assert took < engine_client.WAIT_POLITELY_S / 2, took  # not ~0.2 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_engine_with_no_child_ends_without_searching_for_descendants():
    out = _python("""
        import os, subprocess, sys
        from gpuplay.core.process import lifeline
        lifeline.kill_descendants(os.getpid())  # no child: nothing to search for
        print("psutil" in sys.modules)
        child = subprocess.Popen(["sleep", "30"])
        lifeline.kill_descendants(os.getpid())  # a child: found and killed
        print(child.wait(10), "psutil" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "-9", "True"]


def test_an_engine_never_asked_to_run_is_closed_without_searching_for_descendants():
    # A refused run's early engine ran no code of anyone's: killing its group is enough.
    out = _python("""
        import sys
        from gpuplay.core.engine.client import EngineClient
        c = EngineClient(backends=("numpy",))
        c.start()
        assert c.wait_probe(60) is not None
        proc = c._proc
        c.close(wait=False)
        print("psutil" in sys.modules, proc.returncode is not None)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]
