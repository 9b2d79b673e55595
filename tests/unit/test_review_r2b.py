"""Review r2b: core/installed.py answers where importlib.metadata.version answers otherwise."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from gpuplay.core import installed


@pytest.fixture(autouse=True)
def fresh_lookups(monkeypatch):
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()


def _dist(folder, name, version, file="METADATA"):
    folder.mkdir(parents=True)
    (folder / file).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")


def test_an_unzipped_egg_directory_on_sys_path_is_found_as_importlib_metadata_finds_it(tmp_path):
    egg = tmp_path / "zzq_egg-2.0-py3.11.egg"
    _dist(egg / "EGG-INFO", "zzq_egg", "2.0", file="PKG-INFO")
    site = tmp_path / "site"
    _dist(site / "zzq_egg-1.0.dist-info", "zzq-egg", "1.0")
    sys.path[:0] = [str(egg), str(site)]
    assert metadata.version("zzq_egg") == "2.0"
    assert installed.version("zzq_egg") == metadata.version("zzq_egg")  # r2: '1.0', the later entry


def test_an_egg_directory_alone_is_installed(tmp_path):
    egg = tmp_path / "zzq_egg2-2.0-py3.11.egg"
    _dist(egg / "EGG-INFO", "zzq_egg2", "2.0", file="PKG-INFO")
    sys.path.insert(0, str(egg))
    assert installed.version("zzq_egg2") == metadata.version("zzq_egg2") == "2.0"  # r2: None


def test_a_metadata_folder_suffix_in_capitals_is_found_as_importlib_metadata_finds_it(tmp_path):
    _dist(tmp_path / "ZZQ_UP-3.0.DIST-INFO", "zzq-up", "3.0")
    sys.path.insert(0, str(tmp_path))
    assert installed.version("zzq-up") == metadata.version("zzq-up") == "3.0"  # r2: None
