"""The idle playground's own cost: CPU of the app process and bytes per second sent to the terminal.

Runs the real app (`python -m gpuplay`) in a pseudo-terminal of COLS×ROWS (default 160×45, wide
enough for the telemetry column), waits until its first measurement has finished (the engine's
work is not the UI's cost), then for each view (Live, with the telemetry column; the Telemetry tab)
measures for SECONDS:

- CPU: user+system time of the app process (psutil), as a percentage of one core; the engine
  process is a separate process and is not counted;
- bytes/s: everything the app wrote to the terminal, read from the pty's master side.

With --before SRC (another checkout's `src`, e.g. from `git archive <commit> src | tar -x -C DIR`),
the same is measured for that code first, so both columns come from one run on one machine.
Goal: ≤ 5 % of a core and ≤ 5 KB/s idle.

    python benchmarks/ui_idle_cost.py [--seconds 20] [--size 160x45] [--before /tmp/old/src]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import tempfile
import termios
import time
from pathlib import Path

import psutil

VIEWS = (("live", "1"), ("telemetry", "4"))


class AppInPty:
    """The app as a child of a pty: its output is drained continuously and counted."""

    def __init__(self, src: str, cols: int, rows: int, home: Path) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": src,
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
            "GPUPLAY_CONFIG_DIR": str(home / "config"),
            "GPUPLAY_STATE_DIR": str(home / "state"),
        }
        env.pop("COLUMNS", None)
        env.pop("LINES", None)
        pid, fd = pty.fork()
        if pid == 0:  # the child: the app, in the pty's slave side
            os.chdir(home)
            os.execvpe(sys.executable, [sys.executable, "-m", "gpuplay"], env)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        os.kill(pid, signal.SIGWINCH)
        self.proc = psutil.Process(pid)
        self.bytes = 0
        self.screen_tail = b""

    def pump(self, seconds: float) -> None:
        """Read (and count) everything the app writes for `seconds`."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return
                self.bytes += len(data)
                self.screen_tail = (self.screen_tail + data)[-20000:]

    def key(self, k: str) -> None:
        os.write(self.fd, k.encode())

    def cpu_seconds(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def wait_idle(self, timeout: float) -> None:
        """Until the first measurement has finished: the engine (a child) has been quiet for 3 s."""
        end = time.monotonic() + timeout
        self.pump(8.0)  # the engine starts, imports torch, and the autostarted run begins
        while time.monotonic() < end:
            before = self._children_cpu()
            self.pump(3.0)
            if self._children_cpu() - before < 0.15:
                return

    def _children_cpu(self) -> float:
        total = 0.0
        for child in self.proc.children(recursive=True):
            try:
                t = child.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def measure(self, seconds: float) -> tuple[float, float]:
        c0, b0, t0 = self.cpu_seconds(), self.bytes, time.monotonic()
        self.pump(seconds)
        dt = time.monotonic() - t0
        return 100 * (self.cpu_seconds() - c0) / dt, (self.bytes - b0) / dt

    def quit(self) -> None:
        try:
            self.key("q")
            self.pump(2.0)
            self.proc.wait(5)
        except (psutil.Error, OSError):
            pass
        if self.proc.is_running():
            self.proc.kill()
        os.close(self.fd)


def measure_code(src: str, cols: int, rows: int, seconds: float) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory(prefix="gpuplay-idle-") as home:
        app = AppInPty(src, cols, rows, Path(home))
        try:
            app.wait_idle(120.0)
            out = {}
            for view, key in VIEWS:
                app.key(key)
                app.pump(3.0)  # the tab switch's own redraw is not idle
                out[view] = app.measure(seconds)
            return out
        finally:
            app.quit()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--size", default="160x45")
    ap.add_argument("--before", default=None, help="another checkout's src folder, measured first")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    here = str(Path(__file__).resolve().parents[1] / "src")
    sides = ([("before", args.before)] if args.before else []) + [("after", here)]
    figures = {name: measure_code(src, cols, rows, args.seconds) for name, src in sides}
    print(
        f"idle UI cost · {cols}×{rows} pty · {args.seconds:g} s per view after the first measurement · "
        f"{psutil.cpu_count()} cores · app process only (the engine is another process)"
    )
    head = f"{'view':10s}" + "".join(f" {n + ' CPU %':>13s} {n + ' B/s':>12s}" for n, _ in sides)
    print(head)
    for view, _ in VIEWS:
        cells = "".join(f" {figures[n][view][0]:13.1f} {figures[n][view][1]:12.0f}" for n, _ in sides)
        print(f"{view:10s}{cells}")


if __name__ == "__main__":
    main()
