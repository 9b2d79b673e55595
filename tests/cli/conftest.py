"""CLI tests measure in-process by default: they test what the commands print, and patch the core to
provoke failures. Subprocess tests and tests marked `real_engine` use the engine process, as users do."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _engine_mode(request, monkeypatch):
    if "real_engine" not in request.keywords:
        monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    yield


@pytest.fixture
def as_if_terminal(monkeypatch):
    """The playground and presenter start only on a terminal (cli/terminal.py); CliRunner's
    streams are not one, so a test that checks what they are handed says it runs as on one."""
    import gpuplay.cli.terminal as terminal

    monkeypatch.setattr(terminal, "_is_terminal", lambda stream: True)
