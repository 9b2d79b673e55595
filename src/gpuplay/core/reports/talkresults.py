"""A talk tab's live results, kept beside its saved step so a reload or a restart shows them again.

`gpuplay serve --demo` runs one presenter per browser tab (its own GPUPLAY_TALK_SESSION); a
reload starts a new presenter at the tab's saved step. Without this file the earlier steps'
figures were gone ("—"): they are kept here (written whole or not at all) and loaded back,
marked as measured earlier in this talk, never as live now. The file is read like a recording:
FIFO-safe, bounded, each result checked; a bad file is ignored with one line, never a crash.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuplay.core.reports.decks import Deck, _position_file
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec, SpecError
from gpuplay.core.storage.atomicfile import write_atomic
from gpuplay.core.storage.safeload import json_loads, read_text_file

TALK_RESULTS_FORMAT = "gpuplay-talk-results/1"
MAX_RESULTS = 256  # a deck's steps and their baselines: far fewer
MAX_BYTES = 8 << 20
MAX_SAMPLES = 100_000
STALE_S = 7 * 86_400  # a tab's files untouched for a week belong to a talk that is over


def results_file(deck: Deck) -> Path:
    position = _position_file(deck)
    return position.with_name(position.stem + ".results.json")


def save_results(deck: Deck, measured: Mapping[Any, RunResult]) -> str | None:
    """Write this tab's measured results; the reason when it could not (a talk never stops for it)."""
    doc = {
        "format": TALK_RESULTS_FORMAT,
        "deck": deck.title,
        # Each under the deck's spec it answers (the live run's own spec carries the thread policy).
        "results": [
            {"key": k.to_dict(), "result": r.to_dict()} for k, r in list(measured.items())[:MAX_RESULTS]
        ],
    }
    try:
        write_atomic(results_file(deck), json.dumps(doc, allow_nan=False, default=str))
    except (OSError, ValueError) as exc:
        return f"talk results not saved: {getattr(exc, 'strerror', None) or exc}"
    return None


def _valid(r: RunResult) -> bool:
    """Only a finished, usable measurement with finite, bounded samples comes back."""
    if r.status != "ok" or not r.samples or len(r.samples) > MAX_SAMPLES:
        return False
    if not all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 < x < 86_400
        for x in r.samples
    ):
        return False
    return r.usable and r.median is not None and math.isfinite(r.median)


def load_results(deck: Deck) -> tuple[dict[Any, RunResult], str | None]:
    """This tab's earlier results by spec, and one line when a file was there but not usable."""
    path = results_file(deck)
    try:
        doc = json_loads(read_text_file(path, MAX_BYTES))
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON, nested too deeply
        return {}, f"{path.name}: earlier figures ignored ({getattr(exc, 'strerror', None) or exc})"
    if not isinstance(doc, dict) or doc.get("format") != TALK_RESULTS_FORMAT:
        return {}, f"{path.name}: earlier figures ignored (not a talk results file)"
    items = doc.get("results")
    if not isinstance(items, list) or len(items) > MAX_RESULTS:
        return {}, f"{path.name}: earlier figures ignored (no list of at most {MAX_RESULTS} results)"
    out: dict[Any, RunResult] = {}
    bad = 0
    for item in items:
        try:
            key, r = RunSpec.from_dict(item["key"]), RunResult.from_dict(item["result"])
        except (AttributeError, KeyError, TypeError, ValueError, RecursionError, SpecError):
            bad += 1
            continue
        if _valid(r):
            out[key] = r
        else:
            bad += 1
    return out, (f"{path.name}: {bad} malformed earlier result(s) ignored" if bad else None)


def prune_stale(deck: Deck, now: float | None = None) -> int:
    """Remove per-tab position and results files untouched for a week; how many went."""
    folder = _position_file(deck).parent
    cutoff = (now if now is not None else time.time()) - STALE_S
    removed = 0
    try:
        entries = list(folder.iterdir())
    except OSError:
        return 0
    for p in entries:
        # Only per-tab files (…-<32 hex>.json / .results.json): a terminal talk's own file stays.
        stem = p.name.removesuffix(".json").removesuffix(".results")
        tab = stem.rsplit("-", 1)[-1]
        if len(tab) != 32 or any(c not in "0123456789abcdef" for c in tab):
            continue
        try:
            if p.is_file() and not p.is_symlink() and p.stat().st_mtime < cutoff:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed
