"""Hot reload: watch the user's code files and say which one was saved.

The watcher follows each file's folder, not the file: editors that save by writing
a new file and renaming it over the old one (vim, many IDEs) would otherwise leave
a watch on a file that no longer exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

CodeChanged = Callable[[Path], None]


class CodeFileWatcher:
    """Calls `on_change(path)` from its own thread once per save burst of a watched file.

    `debounce_ms` groups the several writes one save makes. Start with `start()`,
    end with `stop()` (joins the thread; safe to call twice).
    """

    def __init__(
        self, paths: Iterable[Path | str], on_change: CodeChanged, *, debounce_ms: int = 300
    ) -> None:
        self.paths = {Path(p).expanduser().resolve() for p in paths}
        self.on_change = on_change
        self.debounce_ms = debounce_ms
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str = ""  # why watching stopped, if it did on its own

    def start(self) -> CodeFileWatcher:
        if self._thread is None and self.paths:
            self._thread = threading.Thread(target=self._run, name="gpuplay-codewatch", daemon=True)
            self._thread.start()
            self._ready.wait(5.0)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> CodeFileWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _notify(self, path: Path) -> None:
        try:
            self.on_change(path)
        except Exception as exc:  # the callback's bug must not end the watching
            self.error = f"code-change callback failed: {type(exc).__name__}: {exc}"

    def _run(self) -> None:
        import watchfiles

        folders = sorted({str(p.parent) for p in self.paths if p.parent.is_dir()})
        if not folders:
            self.error = "none of the code files' folders exist"
            self._ready.set()
            return
        wanted = {str(p) for p in self.paths}

        def only_ours(change: watchfiles.Change, path: str) -> bool:
            return change != watchfiles.Change.deleted and path in wanted

        try:
            for changes in watchfiles.watch(
                *folders,
                watch_filter=only_ours,
                debounce=self.debounce_ms,
                stop_event=self._stop,
                rust_timeout=200,  # how soon stop() is noticed
                yield_on_timeout=True,
                recursive=False,
                ignore_permission_denied=True,
            ):
                self._ready.set()
                for path in sorted({Path(p) for _change, p in changes}):
                    if path.exists():
                        self._notify(path)
        except Exception as exc:  # a watcher must never take the app down
            self.error = f"stopped watching code files: {type(exc).__name__}: {exc}"
        finally:
            self._ready.set()
