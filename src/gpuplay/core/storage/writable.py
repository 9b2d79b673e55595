"""Whether an output file can be written, asked before anything is measured.

Its own leaf module so the CLI's `--out` and the collectives' `--out` (which import no front end)
ask the same question in the same words.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpuplay.core.storage.safetext import visible


def unwritable(out: str | Path) -> str:
    """Why `out` could not be written ('' when it can be): the nearest folder on its way that
    exists must be a folder in which a file can be made (one is made and removed: permissions, a
    read-only mount, /proc, a file where a folder should be). A full disk or a race can still fail
    the write later; the writers then print what they had instead of losing it."""
    folder = Path(out).expanduser().absolute().parent
    for existing in (folder, *folder.parents):
        try:
            if not existing.exists():
                continue
        except OSError as exc:  # a folder on the way that cannot be searched
            return f"{visible(str(existing))}: {exc.strerror or exc}"
        if not existing.is_dir():
            return f"{visible(str(existing))} is a file, not a folder"
        try:
            fd, probe = tempfile.mkstemp(prefix=".gpuplay-write-check-", dir=existing)
        except OSError as exc:
            return f"no file can be made in {visible(str(existing))} ({exc.strerror or exc})"
        os.close(fd)
        os.unlink(probe)
        return ""
    return f"no folder on the way to {visible(str(folder))} exists"
