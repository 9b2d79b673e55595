"""The playground's two exports into its export folder: the session (JSON, CSV, Markdown; key e)
and a screenshot of the screen (SVG; key s). Each returns what to tell the user."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textual.app import App

from gpuplay.core.result import RunResult
from gpuplay.core.storage.atomicfile import write_atomic
from gpuplay.core.studies.compare import attach_baselines

Outcome = dict[str, Any]  # App.notify's arguments: message, title, severity


def _outcome(message: str, title: str = "", severity: str = "information") -> Outcome:
    return {"message": message, "title": title, "severity": severity}


def _stamp() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def export_session(results: Sequence[RunResult], folder: Path) -> Outcome:
    if not results:
        return _outcome("nothing measured yet to export", "", "warning")
    from gpuplay.core.reports import report

    rows = attach_baselines(list(results))
    stamp = _stamp()
    written = []
    try:
        for ext, text in (
            ("json", report.to_json(rows, source="gpuplay playground")),
            ("csv", report.to_csv(rows)),
            ("md", report.to_markdown(rows, "gpuplay session")),
        ):
            path = folder / f"gpuplay-session-{stamp}.{ext}"
            write_atomic(path, text)
            written.append(path.name)
    except OSError as exc:
        return _outcome(f"export failed: {exc}", "", "error")
    kinds = ", ".join("." + name.rsplit(".", 1)[1] for name in written)
    return _outcome(f"gpuplay-session-{stamp} ({kinds}) in {folder}", "exported", "information")


def save_svg(app: App[Any], folder: Path) -> Outcome:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = app.save_screenshot(f"gpuplay-{_stamp()}.svg", str(folder))
    except OSError as exc:
        return _outcome(f"screenshot failed: {exc}", "", "error")
    return _outcome(f"saved {path}", "screenshot", "information")
