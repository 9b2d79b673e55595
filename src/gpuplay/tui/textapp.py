"""What the playground's App does as any well-behaved terminal app: notifications carry outside
text (a file's, a result's, an exception's), shown as text, never parsed as markup, control
characters visible; SIGTERM and SIGHUP quit like `q`, with the signal's exit status; queries
go to the app's own screen, not to a modal above it."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
from typing import Any

from textual.app import App
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen

from gpuplay.core.storage.safetext import visible as shown_text

HANGUP_GRACE_S = 2.0  # after SIGHUP, how long Textual's own exit may take before the process ends


class TextNotifications(App[None]):
    """Notifications carry outside text: shown as text, never markup, control characters visible.
    (The playground and the presenter both take it.)"""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        super().notify(
            shown_text(message),
            title=shown_text(title, one_line=True),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )


class TextApp(TextNotifications):
    exit_signal: int | None = None  # the signal that ended the app, if one did

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal; on Linux and macOS one whose input thread does not
        hold a lone Escape or the quit back by 0.1 s (tui/driver.py). TEXTUAL_DRIVER still wins."""
        cls = super().get_driver_class()
        if sys.platform != "win32":
            from textual.drivers.linux_driver import LinuxDriver

            if cls is LinuxDriver:
                from gpuplay.tui.driver import PromptDriver

                return PromptDriver
        return cls

    @property
    def main(self) -> Screen[Any]:
        """The app's own screen: queries must not land on a help screen above it."""
        return self.screen_stack[0] if self.screen_stack else self.screen

    def quit_on_signals(self) -> None:
        """Call from on_mount: SIGTERM and SIGHUP end the app (the terminal is restored)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, self._quit_on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread (tests) or no signals on this platform

    def freeze_startup_objects(self) -> None:
        """Call once, after start-up. torch and Textual leave ~10^6 long-lived objects; a full
        collection that scans them all stalls the UI (and any Python-heavy step) for 100+ ms.
        Freezing them keeps later collections to what is new."""
        gc.collect()
        gc.freeze()

    def before_signal_exit(self) -> None:
        """Stop what must not outlive the app (a subclass's child processes)."""

    def _quit_on_signal(self, sig: int, *_: Any) -> None:
        self.exit_signal = sig
        self.before_signal_exit()
        if sig == signal.SIGHUP:
            # The terminal is gone. Textual's shutdown still writes to it, and its writer thread,
            # dead of EIO, leaves a bounded queue that fills: the exit then blocks for ever (seen
            # with tmux kill-session). Children are stopped above; nothing is left to restore.
            timer = threading.Timer(HANGUP_GRACE_S, os._exit, args=(128 + sig,))
            timer.daemon = True
            timer.start()
        self.exit(return_code=128 + sig)
