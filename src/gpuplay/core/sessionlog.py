"""Every finished measurement, appended to a JSON-lines file as it finishes.

One file per session in the user's state directory, flushed and fsynced per
line, so even `kill -9` loses nothing that had finished.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuplay.core.config import state_dir
from gpuplay.core.result import RunResult


def sessions_dir() -> Path:
    return state_dir() / "sessions"


class SessionLog:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or sessions_dir()
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.path = self.directory / f"session-{stamp}-{os.getpid()}.jsonl"
        self.error: str | None = None

    def append(self, result: RunResult) -> bool:
        """Write one line; on a disk problem remember why and keep the app going."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(result.to_dict(), default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError as exc:
            self.error = f"session log not written: {exc}"
            return False


def read_log(path: Path) -> Iterator[dict[str, Any]]:
    """Lines of one log; a torn last line (the process was killed mid-write) is skipped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_history(directory: Path | None = None) -> list[RunResult]:
    """Every result of every session log, oldest session first, each tagged with its session.

    Lines that no longer decode (a torn write, a field from another version) are skipped.
    """
    from gpuplay.core.spec import SpecError

    results = []
    for path in list_sessions(directory):
        for d in read_log(path):
            try:
                r = RunResult.from_dict(d)
            except (KeyError, TypeError, ValueError, SpecError):
                continue
            r.conditions.setdefault("session", path.name)
            results.append(r)
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


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (os.umask sets it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: never a half-written export."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        # mkstemp creates 0600; an export is an ordinary file: the mode open() would give it.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
