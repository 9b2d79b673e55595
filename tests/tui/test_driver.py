"""The playground's terminal driver (tui/driver.py) reading a real pseudo-terminal: a lone Escape
comes when its short wait is over, not at the end of the input thread's idle wait, and stopping
input (what quitting does) wakes the thread at once. The idle wait is made 5 s here, so these
are not timings: with Textual's own loop each would take 5 s or more."""

from __future__ import annotations

import os
import pty
import signal
import sys
import threading
import time
import tty

import pytest
from textual import events

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a POSIX terminal driver")

IDLE_S = 5.0


@pytest.fixture
def terminal(monkeypatch):
    """A PromptDriver reading a raw pseudo-terminal, its input thread running; the keys it sends."""
    from gpuplay.tui import driver as driver_mod

    monkeypatch.setattr(driver_mod, "IDLE_WAIT_S", IDLE_S)
    monkeypatch.delenv("ESCDELAY", raising=False)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT, signal.SIGWINCH)}
    master, slave = pty.openpty()
    tty.setraw(slave)
    got: list[tuple[float, events.Key]] = []

    async def make():  # Textual's Driver takes the running event loop when it is built
        return driver_mod.PromptDriver(object(), mouse=False)

    import asyncio

    d = asyncio.run(make())
    d.fileno = slave
    # Where Textual's loop hands each event on (to the app): recorded instead.
    d.process_message = lambda m: got.append((time.monotonic(), m)) if isinstance(m, events.Key) else None
    d._key_thread = threading.Thread(target=d.run_input_thread, daemon=True)
    d._key_thread.start()
    time.sleep(0.3)  # the thread is now in its idle wait
    yield d, master, got
    d.exit_event.set()
    d._key_thread.join(timeout=IDLE_S * 2)
    d.close()
    os.close(master)
    os.close(slave)
    for s, h in handlers.items():
        signal.signal(s, h)


def _first_key(got, timeout: float = 2 * IDLE_S):
    t0 = time.monotonic()
    while not got and time.monotonic() - t0 < timeout:
        time.sleep(0.005)
    return got[0] if got else (None, None)


def test_a_lone_escape_comes_after_its_own_wait_not_the_idle_wait(terminal):
    d, master, got = terminal
    t0 = time.monotonic()
    os.write(master, b"\x1b")
    t, key = _first_key(got)
    assert key is not None and key.key == "escape"
    assert t - t0 < IDLE_S / 2, f"the Escape came after {t - t0:.2f} s: it waited for the idle wait"


def test_an_arrow_keys_sequence_is_still_one_key(terminal):
    d, master, got = terminal
    os.write(master, b"\x1b[A")
    _, key = _first_key(got)
    time.sleep(0.1)  # past the Escape's wait: nothing else may follow
    assert [k.key for _, k in got] == ["up"]


def test_stopping_input_wakes_the_thread_at_once(terminal):
    d, master, got = terminal
    t0 = time.monotonic()
    d.disable_input()  # what Textual's stop_application_mode does when the app quits
    assert not d._key_thread.is_alive()  # joined: not an error swallowed before the join
    assert time.monotonic() - t0 < IDLE_S / 2, "quitting waited for the input thread's idle wait"


def test_the_playground_runs_on_it(tmp_path):
    from gpuplay.tui.app import GpuPlayApp
    from gpuplay.tui.driver import PromptDriver

    assert GpuPlayApp([tmp_path], telemetry=False).driver_class is PromptDriver
