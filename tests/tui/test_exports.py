"""Exports land in a gpuplay folder of the user's documents (or GPUPLAY_EXPORT_DIR), not in the
current directory, and are ordinary files: the mode the umask gives, written atomically."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpuplay.core.storage.atomicfile import write_atomic
from gpuplay.core.storage.config import export_dir
from gpuplay.tui.app import GpuPlayApp
from tests.tui_helpers import tiny_scenarios, wait_until


@pytest.fixture
def umask():
    saved = os.umask(0o022)
    yield lambda m: os.umask(m)
    os.umask(saved)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_write_gives_the_umask_mode(tmp_path, umask, mask, mode):
    umask(mask)
    path = tmp_path / "out.md"
    write_atomic(path, "x")
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["out.md"]  # no temporary file left


def test_export_dir_is_a_gpuplay_folder_in_documents_unless_set(monkeypatch, tmp_path):
    import platformdirs

    monkeypatch.delenv("GPUPLAY_EXPORT_DIR", raising=False)
    assert export_dir() == Path(platformdirs.user_documents_dir()) / "gpuplay"
    monkeypatch.setenv("GPUPLAY_EXPORT_DIR", str(tmp_path / "mine"))
    assert export_dir() == tmp_path / "mine"


async def test_app_exports_to_the_export_dir_not_the_current_directory(tmp_path, monkeypatch, umask):
    umask(0o022)
    target = tmp_path / "docs" / "gpuplay"
    monkeypatch.setenv("GPUPLAY_EXPORT_DIR", str(target))
    cwd = tmp_path / "repo"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], budget_s=0.1, telemetry=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("e")
        await pilot.press("s")
        await pilot.pause()
    assert list(cwd.iterdir()) == []
    files = sorted(target.iterdir())
    assert sorted(p.suffix for p in files) == [".csv", ".json", ".md", ".svg"]
    for p in files:
        if p.suffix != ".svg":  # Textual writes the screenshot itself
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
