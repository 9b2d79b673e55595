"""The Code view for a user's code file: the file itself, and what went wrong in it.

Plain render functions over text (the error crosses from the engine process as a
result's `message` and `detail`), plus `show_user_code` to fill a CodeView.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import App

from gpuplay.core.catalogue.scenarios import ScenarioSet, scenario_for
from gpuplay.core.storage.codewatch import CodeFileWatcher
from gpuplay.core.workloads.usercode import (
    UserCodeError,
    code_ref,
    frame_lines,
    is_code_ref,
    load,
    read_source,
    ref_path,
)
from gpuplay.tui.widgets import CodeView


def code_error_renderable(message: str, detail: str = "") -> RenderableType:
    """A user-code error: the one-line message, then the traceback frames from the user's file."""
    parts: list[RenderableType] = [Text("✗ " + message, style="bold red")]
    if detail:
        parts.append(Text(detail, style="red"))
    parts.append(
        Text("Fix the file and save it: the run repeats; the last good result stays shown.", style="dim")
    )
    return Group(*parts)


def code_source_renderable(path: Path | str, source: str, detail: str = "") -> RenderableType:
    """The file with line numbers; the lines the traceback names are highlighted."""
    from rich.syntax import Syntax  # pygments: the Code tab's, not the first frame's

    lines = set(frame_lines(detail))
    return Group(
        Text(
            f"{Path(path).name}  (your code: runs with your rights, like python {Path(path).name})",
            style="bold",
        ),
        Syntax(
            source,
            "python",
            theme="ansi_dark",
            line_numbers=True,
            word_wrap=True,
            highlight_lines=lines or None,
        ),
    )


def show_user_code(
    view: CodeView, path: Path | str, source: str, backend_title: str, message: str = "", detail: str = ""
) -> None:
    """Fill the Code view: the file on the left; on the right the error, or how it runs here."""
    left = view.query_one("#code-left")
    right = view.query_one("#code-right")
    left.update(code_source_renderable(path, source, detail))  # type: ignore[attr-defined]
    right.code_text = source  # type: ignore[attr-defined]
    if message:
        right.update(code_error_renderable(message, detail))  # type: ignore[attr-defined]
    else:
        right.update(  # type: ignore[attr-defined]
            Group(
                Text(f"runs as-is on {backend_title}", style="bold"),
                Text(
                    "step(xp, *arrays) gets this backend's array-API namespace (array-api-compat); "
                    "the check runs the same function on NumPy in float64.",
                    style="dim",
                ),
            )
        )


def watch_code_files(
    app: App[Any], paths: Iterable[Path], on_saved: Callable[[Path], None]
) -> CodeFileWatcher:
    """Start watching `paths`; `on_saved(path)` runs on the app's thread after each save.

    Stop it in the app's `on_unmount` (`watcher.stop()`).
    """

    def from_watcher(path: Path) -> None:
        with contextlib.suppress(RuntimeError):  # the app is closing
            app.call_from_thread(on_saved, path)

    return CodeFileWatcher(paths, from_watcher).start()


def recheck(path: Path) -> tuple[str, str, str]:
    """After a save: (source, message, detail). A file that cannot run (syntax, no step, a wrong
    signature) gives its message at once, read without running it; else message is ''."""
    try:
        w = load(path)
    except UserCodeError as exc:
        try:
            source = read_source(path)
        except UserCodeError:
            source = ""
        return source, exc.summary, exc.detail
    return w.info.source, "", ""


def code_scenarios(sset: ScenarioSet, paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Put the user's code files first in the scenario list; a broken one is a warning. Every
    file is returned to be watched, the broken ones too: fixed and saved, they join the list
    (`adopt_code_file`)."""
    found: dict[str, Any] = {}
    problems: list[str] = []
    kept: list[Path] = []
    for path in paths:
        try:
            sc = scenario_for(path)
        except UserCodeError as exc:
            problems.append(f"code file {path}: {exc.summary} (watched: it loads once saved fixed)")
            kept.append(Path(path).expanduser().resolve())
            continue
        found[sc.name] = sc
        kept.append(Path(sc.path or path))
    sset.scenarios = {**found, **{k: v for k, v in sset.scenarios.items() if k not in found}}
    return kept, problems


def listed(sset: ScenarioSet, path: Path) -> bool:
    """Whether the code file at `path` is in the scenario list (it loaded once)."""
    return any(sc.path is not None and Path(sc.path) == path for sc in sset.scenarios.values())


def adopt_code_file(sset: ScenarioSet, path: Path) -> Any:
    """A code file that did not load at start-up, now saved: its scenario, put first with the
    other code files (None while it still does not load)."""
    try:
        sc = scenario_for(path)
    except UserCodeError:
        return None
    sset.scenarios = {sc.name: sc, **{k: v for k, v in sset.scenarios.items() if k != sc.name}}
    return sc


__all__ = ["code_ref", "is_code_ref", "ref_path"]  # re-exported for the Code tab
