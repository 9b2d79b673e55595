"""Files written whole or not at all: an export replaced by rename, a log line appended in one write.

Its own module, below everything that writes files (results, roofline peaks, session logs, exports),
so none of them has to import another to get it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path


def append_line(path: Path, line: str, sync: bool = True) -> None:
    """Append `line` whole or not at all: one write of the encoded line and its newline, and on
    a short write (a full disk) the file is cut back, so the next line does not start mid-line.
    `sync`: fsync before returning (False: the caller syncs, as the session log does on a thread)."""
    data = (line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        start = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes written (disk full?)")
            if sync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)


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
