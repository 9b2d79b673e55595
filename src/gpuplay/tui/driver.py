"""The terminal driver: Textual's Linux driver with an input thread that never sleeps on a key.

Textual 8.2.8's `LinuxDriver.run_input_thread` waits for input in `select(0.1)` and only then asks
its parser whether a lone Escape's wait (`ESCDELAY`) is over, so:

- a lone Escape (the terminal sends one byte, and only time tells it from the start of an arrow
  key's sequence) reached the app 100–200 ms after the press, whatever `ESCDELAY` says: the help
  screen's Escape measured 130 ms against 26 ms for `q`, which closes it too;
- quitting waited for that thread: `disable_input` sets an event and joins the thread, which saw
  the event only when its `select(0.1)` ended, then slept in one more `select(0.1)` on no file at
  all: 100–200 ms of the 220 ms between `q` and `App.run` returning.

This driver waits until the Escape's deadline when one is pending, and a pipe wakes the thread the
moment the app stops reading input. Everything else is Textual's driver, unchanged; the loop
below is Textual's own with those two changes (textual is pinned in pyproject.toml).
`tests/tui/test_driver.py` drives it through a real pseudo-terminal.
"""

from __future__ import annotations

import os
import selectors
import time
from codecs import getincrementaldecoder
from threading import Event
from typing import Any

from textual import constants
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

IDLE_WAIT_S = 0.1  # with nothing pending, how long one wait for input lasts (Textual's figure)
ESCAPE_WAIT_S = 0.025  # a lone Escape's wait when ESCDELAY is not set (Textual's default is 0.1)


def escape_delay() -> float:
    """How long a lone Escape waits for the rest of a sequence: ESCDELAY (ms) if the user set it,
    as ncurses reads it, else 25 ms. A terminal writes a key's whole sequence at once, so its
    bytes arrive together; 25 ms (tmux's own default is 10 ms) still covers a slow link's gaps."""
    return constants.ESCAPE_DELAY if "ESCDELAY" in os.environ else ESCAPE_WAIT_S


class _WakingEvent(Event):
    """The driver's exit event: setting it also wakes the input thread out of its wait."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_fd, b"x")
        except OSError:  # the pipe is full (then the thread wakes anyway) or closed
            pass


class PromptDriver(LinuxDriver):
    """Textual's Linux driver; keys and quitting are not held back by a fixed 0.1 s wait."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.exit_event = _WakingEvent(self._wake_w)

    def close(self) -> None:
        super().close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def run_input_thread(self) -> None:
        """Textual's loop (linux_driver.py), waiting until a pending Escape's deadline, and woken
        by the exit event's pipe."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        delay = escape_delay()
        constants_delay = constants.ESCAPE_DELAY
        deadline: float | None = None  # when a lone Escape read last is due, if one may be pending
        try:
            # The parser reads its wait from textual.constants at each Escape: ours for this thread.
            constants.ESCAPE_DELAY = delay  # type: ignore[misc]
            while not self.exit_event.is_set():
                wait = IDLE_WAIT_S if deadline is None else max(0.0, deadline - time.monotonic()) + 0.001
                for key, _mask in selector.select(wait):
                    if key.fd == self._wake_r:
                        _drain(self._wake_r)
                        continue
                    data = decode(os.read(self.fileno, 1024 * 4))
                    if not data:
                        break  # stdin piped and at its end
                    for event in parser.feed(data):
                        self.process_message(event)
                    if "\x1b" in data:  # an Escape, alone or a sequence's start: its wait begins now
                        deadline = time.monotonic() + delay
                for event in parser.tick():
                    self.process_message(event)
                if deadline is not None and time.monotonic() > deadline:
                    deadline = None
        finally:
            constants.ESCAPE_DELAY = constants_delay  # type: ignore[misc]
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except Exception:  # EOFError or ParseError at the end of input, as in Textual's loop
                pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except OSError:  # BlockingIOError: empty
        pass
