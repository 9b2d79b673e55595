"""CLI tests measure in-process by default: they test what the commands print, and patch the core to
provoke failures. Subprocess tests and tests marked `real_engine` use the engine process, as users do."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _engine_mode(request, monkeypatch):
    if "real_engine" not in request.keywords:
        monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    yield
