"""The measurement engine: a process of its own that owns torch, CuPy, CUDA and the timed loop.

The UI and the headless commands drive it through the `Engine` protocol (protocol.py), implemented
by `EngineClient` (submit a spec, receive typed phase, sample and result messages (messages.py),
cancel, shut down) and by `InProcessEngine`. A CUDA fault, a hung compile or a user's crashing
code then costs one engine process, never the app: the client kills it and starts another.

The names below are loaded on first use (PEP 562): importing a submodule (the engine's own
`server`, the entry's early start in `process`) does not import the client and NumPy with it.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing (5-9 ms) is not imported: the entry imports this before its spawn

if TYPE_CHECKING:
    from gpuplay.core.engine.client import EngineClient, make_engine, measure, shared_client, shutdown_shared
    from gpuplay.core.engine.protocol import Engine

__all__ = ["Engine", "EngineClient", "make_engine", "measure", "shared_client", "shutdown_shared"]

_WHERE = {"Engine": "protocol", **dict.fromkeys(__all__[1:], "client")}


def __getattr__(name: str) -> object:
    if name in _WHERE:
        return getattr(importlib.import_module(f"gpuplay.core.engine.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'gpuplay.core.engine' has no attribute {name!r}")
