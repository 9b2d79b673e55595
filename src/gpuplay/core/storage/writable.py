"""Whether an output file can be written, asked before anything is measured.

Its own leaf module so the CLI's `--out` and the collectives' `--out` (which import no front end)
ask the same question in the same words.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from gpuplay.core.storage.safetext import visible


def unwritable(out: str | Path) -> str:
    """Why `out` could not be written ('' when it can be): its folder must exist (a missing one
    is said, never created: `--out no-such-folder/x.json` was a typo that hid the results in a
    new folder), and be one in which a file can be made (one is made and removed: permissions, a
    read-only mount, /proc, a file where a folder should be). A full disk or a race can still fail
    the write later; the writers then print what they had instead of losing it."""
    target = Path(out).expanduser().absolute()
    what = _not_a_regular_file(target)
    if what:
        return what
    folder = target.parent
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
        if existing != folder:  # never made behind the user's back: a typo'd folder hid the results
            return (
                f"no folder {visible(str(folder))}; create it first (mkdir -p {visible(str(folder))}) "
                "or name a file in a folder that exists"
            )
        return ""
    return f"no folder on the way to {visible(str(folder))} exists"


def _not_a_regular_file(target: Path) -> str:
    """Why `target`, where it exists, is not a file gpuplay may replace ('' when it is one or is
    not there): results are written to a temporary file renamed over the target, which would
    replace a device (`--out /dev/null` made /dev/null a plain file for root), a pipe, or a
    symbolic link itself (its real file left as it was)."""
    try:
        st = os.lstat(target)
    except OSError:
        return ""  # not there, or a file on the way (NotADirectoryError): the folders are asked next
    name = visible(str(target))
    if stat.S_ISLNK(st.st_mode):
        real = visible(os.path.realpath(target))
        return f"{name} is a symbolic link (to {real}); name the file itself: {real}"
    if stat.S_ISDIR(st.st_mode):
        return f"{name} is a folder; name a file in it, e.g. {visible(str(target / 'results.json'))}"
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a pipe (FIFO)" if stat.S_ISFIFO(st.st_mode)
            else "a socket" if stat.S_ISSOCK(st.st_mode)
            else "not a regular file"
        )  # fmt: skip
        return f"{name} is {kind}, not a file; name a file (to see the results, leave out --out)"
    return ""


# What an output file's suffix says its format is; a suffix not here leaves --format to decide.
SUFFIX_FORMATS = {".json": "json", ".csv": "csv", ".md": "markdown", ".markdown": "markdown"}


def format_for_out(
    fmt: str, given: bool, out: str | os.PathLike[str] | None, formats: tuple[str, ...]
) -> tuple[str, str]:
    """(the format to write, '' or why not) for --format `fmt` (`given`: named by the user) and
    --out `out`: the format named, else what the suffix says (`--out r.json` writes JSON, not
    Markdown under a .json name), else the default. `table` into a file is Markdown, so it goes
    with .md alone; a format named against the suffix (`--format csv --out r.json`) is refused."""
    if not out:
        return fmt, ""
    name = os.fsdecode(out)
    suffix = os.path.splitext(name)[1].lower()
    implied = SUFFIX_FORMATS.get(suffix)
    if implied is None:
        return fmt, ""
    written = "markdown" if fmt == "table" else fmt
    if given and written != implied:
        ext = ".md" if written == "markdown" else f".{written}"
        return fmt, (
            f"--format {fmt} writes {written}, but --out {visible(name)} names a {suffix} file: "
            f"leave out --format (the suffix picks {implied}), or name the file {ext}"
        )
    if implied not in formats and implied == "markdown" and fmt == "table":
        return fmt, ""  # a command whose table is plain text: written as it prints
    if implied not in formats:
        can = ", ".join(f for f in formats if f != "table")
        return (
            fmt,
            f"--out {visible(name)}: this command writes {can}, not {implied}; name the file for one of them",
        )
    return implied if implied in formats else fmt, ""
