"""TOML and JSON parsing that a hostile file cannot crash.

`tomllib` and `json` recurse once per level of nesting: `[[[[…]]]]` ten thousand deep raises
RecursionError, which no loader expects, and one bad scenario would stop every command. These
turn it into the parser's own decode error, so each loader names the file as it does for any
other bad file and the rest still load.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from typing import Any

TOO_DEEP = "nested too deeply"


def toml_loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(TOO_DEEP) from None


def json_loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(TOO_DEEP, text[:0], 0) from None


# -- reading a user's file -------------------------------------------------------------------
MAX_TEXT_BYTES = 64 << 20  # no scenario, deck, result or config file comes near: a larger one is a mistake


class FileReadError(OSError):
    """A user file that cannot be read as text; `str()` names the file and says why.

    An OSError, so every loader's existing `except OSError` reports it as it does a missing file.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(reason)
        self.filename = os.fspath(path)
        self.strerror = reason  # what `exc.strerror or exc` shows: the reason, without the path

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


class MissingFileError(FileReadError, FileNotFoundError):
    """No such file: still a FileNotFoundError, so a loader's own words for that case (the decks
    it ships, how to record one) keep working after swapping in read_text_file."""


def kind_of_mode(mode: int) -> str:
    """What a path that is not a regular file is, in words: a FIFO, a device (/dev/null), …"""
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "not a regular file (a FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "not a regular file (a device, such as /dev/null)"
    if stat.S_ISSOCK(mode):
        return "not a regular file (a socket)"
    return "not a regular file"


def not_regular(path: str | os.PathLike[str]) -> str:
    """kind_of_mode for a path that exists (its target's kind, as open() would see it)."""
    try:
        return kind_of_mode(os.stat(path).st_mode)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"


def read_text_file(path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_BYTES) -> str:
    """A user file's UTF-8 text, or FileReadError saying why not.

    O_NONBLOCK: opening a FIFO must not wait for a writer (every command would hang on a FIFO
    named `config.toml` or `x.toml` in a scenario folder); then only a regular file is read, and
    only up to `max_bytes`, so a device file or a huge file cannot stall or exhaust memory either.
    Symlinks are followed: a link to a regular file is a normal way to share a file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise MissingFileError(path, "no such file") from None
    except OSError as exc:
        raise FileReadError(path, f"cannot open ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FileReadError(path, kind_of_mode(mode))
    with os.fdopen(fd, "rb") as f:
        # The descriptor stays non-blocking, which changes nothing for a regular file's reads.
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileReadError(path, f"larger than {max_bytes >> 20} MiB; not read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json_file(path: str | os.PathLike[str], error: type[Exception] = ValueError) -> Any:
    """A user file's JSON, or `error` naming the file and why not (missing, a FIFO or a folder,
    too large, not UTF-8, not JSON, nested too deeply): the one reader of the API's `load` and the
    sweep files, so both say the same words for the same file."""
    try:
        return json_loads(read_text_file(path))
    except FileReadError as exc:
        raise error(str(exc)) from None
    except ValueError as exc:  # json.JSONDecodeError, and TOO_DEEP from json_loads
        raise error(f"{os.fspath(path)}: not a readable JSON file ({exc})") from None
