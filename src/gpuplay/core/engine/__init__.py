"""The measurement engine: a process of its own that owns torch, CuPy, CUDA and the timed loop.

The UI and the headless commands drive it through `EngineClient` (submit a spec, receive phase,
sample and result events, cancel, shut down). A CUDA fault, a hung compile or a user's crashing
code then costs one engine process, never the app: the client kills it and starts another.
"""

from gpuplay.core.engine.client import EngineClient, make_engine, measure, shared_client, shutdown_shared

__all__ = ["EngineClient", "make_engine", "measure", "shared_client", "shutdown_shared"]
