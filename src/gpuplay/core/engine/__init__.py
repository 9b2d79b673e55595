"""The measurement engine: a process of its own that owns torch, CuPy, CUDA and the timed loop.

The UI and the headless commands drive it through the `Engine` protocol (protocol.py), implemented
by `EngineClient` (submit a spec, receive typed phase, sample and result messages (messages.py),
cancel, shut down) and by `InProcessEngine`. A CUDA fault, a hung compile or a user's crashing
code then costs one engine process, never the app: the client kills it and starts another.
"""

from gpuplay.core.engine.client import EngineClient, make_engine, measure, shared_client, shutdown_shared
from gpuplay.core.engine.protocol import Engine

__all__ = ["Engine", "EngineClient", "make_engine", "measure", "shared_client", "shutdown_shared"]
