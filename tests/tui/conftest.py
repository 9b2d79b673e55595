"""UI tests measure in-process by default: they test how the app reacts, and patch the core to
provoke failures. Tests marked `real_engine` use the engine process, as the real app does."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _engine_mode(request, monkeypatch):
    if "real_engine" not in request.keywords:
        monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    yield
