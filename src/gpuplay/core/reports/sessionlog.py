"""Every finished measurement, appended to a JSON-lines file as it finishes.

One file per session in the user's state directory. Each line is written whole in one write
before `append` returns, so even `kill -9` loses nothing that had finished; its fsync (the disk's
own copy, against a power cut) follows on a thread of its own, and the process's exit waits for it.

Log format 2 (a line's `log_format`) writes a result's step timings packed (core/measure/packed.py:
float64 bytes in base64, exact, NaN and inf kept): a sweep point's 2,500-30,000 timings as JSON
numbers took ~6 ms per 10,000 to write, on every point's way to the next. Format 1 (no
`log_format`: every log before it) holds them as JSON numbers. `read_log` reads both and hands
every reader the same dict, timings as lists of floats; a line of a newer format is skipped, said.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpuplay.core.measure.packed import TIMING_KEYS, is_packed, pack, unpack
from gpuplay.core.result import RunResult
from gpuplay.core.storage.atomicfile import append_line
from gpuplay.core.storage.config import state_dir
from gpuplay.core.storage.safeload import json_loads

LOG_FORMAT = 2
READS = (1, 2)  # the formats read_log understands


def sessions_dir() -> Path:
    return state_dir() / "sessions"


class SessionLog:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or sessions_dir()
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.path = self.directory / f"session-{stamp}-{os.getpid()}.jsonl"
        self.error: str | None = None
        self._sync_failed = False

    def append(self, result: RunResult) -> bool:
        """Write one line, whole; on a disk problem remember why and keep the app going (False).

        The fsync follows on the syncer's thread: a sweep point waited ~1-1.5 ms for the disk
        here before the next point could start. A failed fsync is said at the next append (False)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            append_line(self.path, log_line(result), sync=False)
        except OSError as exc:
            self.error = f"session log not written: {exc}"
            return False
        _SYNCER.request(self.path, self._not_synced)
        if self._sync_failed:  # said now, by this False, once: a later append says its own
            self._sync_failed = False
            _SYNCER.unsaid.pop(self.path, None)
            return False
        return True

    def sync(self, timeout: float | None = None) -> bool:
        """Wait until every line appended so far is fsynced (False: still going after `timeout`)."""
        return _SYNCER.wait(timeout)

    def _not_synced(self, path: Path, exc: OSError) -> None:
        self.error = f"session log not saved to disk ({path.name}): {exc}"
        self._sync_failed = True


EXIT_SYNC_S = 10.0  # at exit, the last lines' fsync is waited for this long at most


class _Syncer:
    """fsyncs the files it is asked to on a thread of its own (one a process, started at its first
    request); the process's exit waits for it. A failed fsync is said to the file's `on_error`."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: dict[Path, Callable[[Path, OSError], None]] = {}
        self.busy = False
        self.thread: threading.Thread | None = None
        self.pid = os.getpid()
        self.unsaid: dict[Path, str] = {}  # failed fsyncs no append has said yet: said at exit

    def request(self, path: Path, on_error: Callable[[Path, OSError], None]) -> None:
        if self.pid != os.getpid():  # a forked child: no thread, and a lock perhaps held in the parent
            self.__init__()  # type: ignore[misc]
        with self.cond:
            self.pending[path] = on_error
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="gpuplay-log-sync", daemon=True)
                self.thread.start()
                atexit.register(self._at_exit)
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: bool(self.pending))
                paths, self.pending, self.busy = self.pending, {}, True
            for path, on_error in paths.items():
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                except FileNotFoundError:
                    # Removed before its turn (the user's `rm`, a cleanup): its lines went with it,
                    # not for a disk's fault, and the next append writes and syncs a new file.
                    continue
                except OSError as exc:
                    self.unsaid[path] = f"session log not saved to disk ({path}): {exc}"
                    on_error(path, exc)
            with self.cond:
                self.busy = False
                self.cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: not self.pending and not self.busy, timeout)

    def _at_exit(self) -> None:
        """The exit waits for the last fsync (EXIT_SYNC_S at most) and says on stderr what is not
        on the disk: a failed fsync no append said (the last line's), or one still going."""
        if self.pid != os.getpid():
            return
        done = self.wait(EXIT_SYNC_S)
        lines = list(self.unsaid.values())
        if not done:
            lines.append(
                f"session log not yet saved to disk after {EXIT_SYNC_S:g} s (fsync still going); exiting"
            )
        for line in lines:
            with contextlib.suppress(OSError, ValueError):
                print(f"gpuplay: warning: {line}", file=sys.stderr, flush=True)


_SYNCER = _Syncer()


def log_line(result: RunResult) -> str:
    """One result as a line of the current log format."""
    d = result.to_dict()
    for key in TIMING_KEYS:
        d[key] = pack(d[key])
    return json.dumps({"log_format": LOG_FORMAT, **d}, default=str)


def read_log(path: Path, problems: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The objects of one log, line by line. What cannot be read is skipped and, with `problems`,
    said there in words naming the file: a FIFO or folder in its place, lines that are not UTF-8,
    not JSON or not an object, a torn last line (the process was killed or the disk full mid-write).
    """
    # O_NONBLOCK: opening a FIFO must not wait for a writer; then only a regular file is read.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        _problem(problems, path, f"cannot read ({exc.strerror or exc}); skipped")
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        _problem(problems, path, "not a regular file; skipped")
        return
    with open(fd, "rb") as f:
        bad: dict[str, int] = {}
        torn = False
        for raw in f:
            obj, why = _parse_line(raw)
            if why == "torn":
                torn = True  # only the last line can lack its newline
            elif why:
                bad[why] = bad.get(why, 0) + 1
            elif obj is not None:
                yield obj
        for why, n in bad.items():
            _problem(problems, path, f"{n} line{'s' if n != 1 else ''} {why}; skipped")
        if torn:
            _problem(
                problems, path, "last line torn (the disk was full or gpuplay was killed mid-write); skipped"
            )


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """One line's object, or why it is not one ("" for a blank line, "torn" for a cut last line)."""
    if not raw.strip():
        return None, ""
    try:
        obj = json_loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except json.JSONDecodeError:
        return None, "not JSON" if raw.endswith(b"\n") else "torn"
    if not isinstance(obj, dict):
        return None, "not an object"
    fmt = obj.pop("log_format", 1)
    if isinstance(fmt, bool) or fmt not in READS:
        shown = fmt if isinstance(fmt, int | float) else repr(str(fmt)[:20])
        return None, f"of log format {shown} (written by a newer gpuplay?)"
    for key in TIMING_KEYS:
        if is_packed(obj.get(key)):
            try:
                obj[key] = unpack(obj[key])
            except ValueError:
                return None, "with unreadable packed timings"
    return obj, ""


def _problem(problems: list[str] | None, path: Path, text: str) -> None:
    if problems is not None:
        problems.append(f"{Path(path).name}: {text}")


def read_history(directory: Path | None = None, problems: list[str] | None = None) -> list[RunResult]:
    """Every result of every session log, oldest session first, each tagged with its session.

    What cannot be read (see `read_log`) and lines that no longer decode as a result (a field from
    another version) are skipped; with `problems`, each file's trouble is said there once.
    """
    from gpuplay.core.spec import SpecError

    results = []
    for path in list_sessions(directory):
        undecoded = 0
        for d in read_log(path, problems):
            try:
                r = RunResult.from_dict(d)
            except (KeyError, TypeError, ValueError, SpecError, AttributeError, RecursionError):
                undecoded += 1
                continue
            r.conditions.setdefault("session", path.name)
            results.append(r)
        if undecoded:
            _problem(
                problems,
                path,
                f"{undecoded} line{'s' if undecoded != 1 else ''} not a gpuplay result; skipped",
            )
    return results


def by_session(results: list[RunResult]) -> list[list[RunResult]]:
    """Results grouped by the session that measured them, in order of first appearance.

    Speedups pair a result with a NumPy baseline of the same session only: another
    session ran under other conditions (load, clocks, versions).
    """
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(str(r.conditions.get("session", "")), []).append(r)
    return list(groups.values())


def list_sessions(directory: Path | None = None) -> list[Path]:
    directory = directory or sessions_dir()
    if not directory.is_dir():
        return []
    return sorted(directory.glob("session-*.jsonl"))
