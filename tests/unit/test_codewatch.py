"""The code-file watcher against real files edited on disk."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

from gpuplay.core.storage.codewatch import CodeFileWatcher


def wait_for(q: queue.Queue, timeout: float = 5.0) -> Path:
    return q.get(timeout=timeout)


def test_saving_the_file_calls_back_once_per_save(tmp_path, no_leaked_threads):
    path = tmp_path / "mine.py"
    other = tmp_path / "other.py"
    path.write_text("x = 1\n")
    other.write_text("y = 1\n")
    seen: queue.Queue = queue.Queue()
    with CodeFileWatcher([path], seen.put, debounce_ms=200):
        other.write_text("y = 2\n")  # not watched
        with path.open("w") as f:  # one save, several writes
            f.write("x = 2\n")
            f.flush()
            f.write("z = 3\n")
        assert wait_for(seen) == path.resolve()
        time.sleep(0.6)
        assert seen.empty(), "one save must give one callback, and other files none"


def test_a_save_by_rename_is_seen(tmp_path, no_leaked_threads):
    """Editors like vim write a new file and rename it over the old one."""
    path = tmp_path / "mine.py"
    path.write_text("x = 1\n")
    seen: queue.Queue = queue.Queue()
    with CodeFileWatcher([path], seen.put, debounce_ms=100):
        tmp = tmp_path / ".mine.py.swp"
        tmp.write_text("x = 2\n")
        os.replace(tmp, path)
        assert wait_for(seen) == path.resolve()
        path.write_text("x = 3\n")  # and the watch survives the rename
        assert wait_for(seen) == path.resolve()


def test_a_failing_callback_does_not_stop_watching(tmp_path, no_leaked_threads):
    path = tmp_path / "mine.py"
    path.write_text("x = 1\n")
    seen: queue.Queue = queue.Queue()

    def callback(p: Path) -> None:
        seen.put(p)
        raise RuntimeError("bug in the app")

    watcher = CodeFileWatcher([path], callback, debounce_ms=100).start()
    try:
        path.write_text("x = 2\n")
        wait_for(seen)
        time.sleep(0.3)
        path.write_text("x = 3\n")
        wait_for(seen)
        assert "bug in the app" in watcher.error
    finally:
        watcher.stop()
        watcher.stop()  # twice is fine
