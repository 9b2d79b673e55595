"""An installed distribution's version, found as importlib.metadata finds it, without its import.

importlib.metadata brings email's parser, zipfile and csv with it: ~11 ms to import on the 2-core
machine, paid by a front end placing a result on its roof and by an engine recording a library
it has not loaded, both on a NumPy run's path. The lookup is the same: the first entry
of sys.path holding the distribution's `.dist-info` directory (named `{name}-{version}.dist-info`
by the "Recording installed projects" specification, the name normalised), and the `Version`
field of its METADATA (the core metadata's header). Anything else — a legacy `.egg-info` found
first, a METADATA without the field, an unreadable folder — asks importlib.metadata itself, so
its answer stands wherever the two could differ (tests/unit/test_installed.py holds them equal for
every distribution installed).
"""

from __future__ import annotations

import functools
import os
import re
import sys

_SEPARATORS = re.compile(r"[-_.]+")
_HEADER_BYTES = 8192  # the Version field is among the first few headers


def normalized(name: str) -> str:
    """A project name as a metadata folder spells it (PEP 503, separators as underscores)."""
    return _SEPARATORS.sub("_", name).lower()


@functools.cache
def version(name: str) -> str | None:
    """`name`'s installed version, or None where it is not installed; once per process."""
    wanted = normalized(name)
    for entry in sys.path:
        folders = _metadata_folders(entry)
        if folders is None:  # an archive: importlib.metadata reads inside it
            return _metadata_version(name)
        for project, folder, kind in folders:
            if project != wanted:
                continue
            if kind == "egg-info":
                return _metadata_version(name)
            found = _version_field(os.path.join(entry or ".", folder, "METADATA"))
            return found if found is not None else _metadata_version(name)
    # Not on sys.path's folders: not installed, unless another finder lists distributions
    # (importlib.metadata asks every finder on sys.meta_path that can).
    return _metadata_version(name) if _other_distribution_finders() else None


def _other_distribution_finders() -> bool:
    from importlib.machinery import PathFinder

    return any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path)


@functools.cache
def _metadata_folders(entry: str) -> tuple[tuple[str, str, str], ...] | None:
    """(normalised project, folder, "dist-info" or "egg-info") in one sys.path entry, listed once
    per process; () for a missing folder (python3XX.zip often is), None for an archive or an
    unzipped egg (its EGG-INFO: importlib.metadata reads them)."""
    if os.path.basename(entry).lower().endswith(".egg"):
        return None
    try:
        names = os.listdir(entry or ".")
    except OSError:
        return None if os.path.isfile(entry) else ()
    out = []
    for folder in names:
        stem, dot, kind = folder.lower().rpartition(".")  # as importlib.metadata: any case
        if dot and kind in ("dist-info", "egg-info"):
            out.append((normalized(stem.split("-", 1)[0]), folder, kind))
    return tuple(out)


def _version_field(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            head = f.read(_HEADER_BYTES)
    except OSError:
        return None
    for line in head.split(b"\n"):
        line = line.rstrip(b"\r")
        if not line:  # the headers end at the first blank line
            return None
        key, colon, value = line.partition(b":")
        if colon and key.strip().lower() == b"version":
            text = value.strip().decode("utf-8", "replace")
            return text or None
    return None


def _metadata_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
