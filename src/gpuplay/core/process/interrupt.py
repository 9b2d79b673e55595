"""Stop Python code that never checks the cancel event, such as a user's endless loop.

Setting `cancel` makes a watcher thread raise an exception asynchronously in the
thread being watched (CPython's PyThreadState_SetAsyncExc). It lands at the next
Python bytecode, so it stops a Python loop at once; a long call inside C (one huge
NumPy operation, time.sleep) sees it only when the call returns. A process that must
stop regardless is the engine's job: it kills the measurement process.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(BaseException):
    """Raised into a running thread on cancel. A BaseException, like KeyboardInterrupt, so that
    neither a user's `except Exception` nor gpuplay's error wrapping swallows it."""


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> int:
    """Schedule `exc` in the thread (None withdraws a scheduled one); returns threads changed."""
    obj = ctypes.py_object(exc) if exc is not None else None
    return int(ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), obj))


POLL_S = 0.1  # how often the watcher looks for the end of the block (it sleeps otherwise)


@contextmanager
def interruptible(cancel: threading.Event, exc_type: type[BaseException] = Interrupted) -> Iterator[None]:
    """Raise `exc_type` in this thread when `cancel` is set while the block runs.

    The caller must catch `exc_type` around the `with` block: the exception can
    arrive anywhere inside it, its exit included.
    """
    target = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(POLL_S):
                with lock:
                    if state["armed"]:
                        state["fired"] = True
                        _set_async_exc(target, exc_type)
                return

    watcher = threading.Thread(target=watch, name="gpuplay-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        with lock:
            state["armed"] = False
            if state["fired"]:
                # Withdraw an exception not yet delivered, so none escapes the block.
                _set_async_exc(target, None)
        watcher.join()
