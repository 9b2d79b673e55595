"""core/storage/installed.py finds a distribution's version as importlib.metadata does, without importing it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import zipfile
from importlib import metadata

import pytest

from gpuplay.core.storage import installed


@pytest.fixture(autouse=True)
def fresh_lookups():
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()
    yield
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it():
    names = {d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20  # the test environment's own: numpy, torch, click, rich, pytest, ...
    differ = {n: (installed.version(n), metadata.version(n)) for n in names}
    assert {n: v for n, v in differ.items() if v[0] != v[1]} == {}
    for spelled in ("NumPy", "nvidia_ml_py", "nvidia.ml.py", "NVIDIA-ML-PY"):  # any spelling of a name
        if installed.version("nvidia-ml-py") is not None or spelled == "NumPy":
            assert installed.version(spelled) == metadata.version(spelled)


def test_a_project_that_is_not_installed_is_none_without_importlib_metadata():
    code = textwrap.dedent("""
        import sys
        from gpuplay.core.storage import installed
        print(installed.version("no-such-project-here"), installed.version("numpy") is not None,
              "importlib.metadata" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "True", "False"]


def _dist(folder, name: str, version: str, kind: str = "dist-info", metadata_text: str | None = None):
    d = folder / f"{name}-{version}.{kind}"
    d.mkdir(parents=True)
    text = (
        metadata_text
        if metadata_text is not None
        else f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
    )
    (d / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_text(text)
    return d


def test_the_first_folder_on_the_path_wins_and_odd_cases_ask_importlib_metadata(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "demo_pkg", "2.0")
    _dist(second, "demo_pkg", "1.0")
    _dist(first, "legacy", "3.1", kind="egg-info")  # importlib.metadata reads an egg-info's PKG-INFO
    _dist(first, "headless", "0.5", metadata_text="Metadata-Version: 2.1\nName: headless\n\nVersion: 9\n")
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped-4.2.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 4.2\n\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(first), str(second)])
    metadata_calls: list[str] = []
    real = installed._metadata_version
    monkeypatch.setattr(installed, "_metadata_version", lambda n: metadata_calls.append(n) or real(n))
    for name in ("demo-pkg", "Demo.Pkg", "legacy", "headless"):
        assert installed.version(name) == metadata.version(name), name
    assert installed.version("demo_pkg") == "2.0"
    assert metadata_calls == ["legacy", "headless"]  # an egg-info, a METADATA with no Version header
    monkeypatch.setattr(sys, "path", [str(archive), str(first)])
    installed.version.cache_clear()
    assert installed.version("zipped") == "4.2" == metadata.version("zipped")
    assert metadata_calls[-1] == "zipped"


@pytest.fixture
def fresh_lookups_and_path(monkeypatch):
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    installed.version.cache_clear()
    installed._metadata_folders.cache_clear()


def _metadata_dir(folder, name, version, file="METADATA"):
    folder.mkdir(parents=True)
    (folder / file).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")


@pytest.mark.usefixtures("fresh_lookups_and_path")
def test_an_unzipped_egg_directory_on_sys_path_is_found_as_importlib_metadata_finds_it(tmp_path):
    egg = tmp_path / "zzq_egg-2.0-py3.11.egg"
    _metadata_dir(egg / "EGG-INFO", "zzq_egg", "2.0", file="PKG-INFO")
    site = tmp_path / "site"
    _metadata_dir(site / "zzq_egg-1.0.dist-info", "zzq-egg", "1.0")
    sys.path[:0] = [str(egg), str(site)]
    assert metadata.version("zzq_egg") == "2.0"
    assert installed.version("zzq_egg") == metadata.version("zzq_egg")  # not '1.0', the later entry


@pytest.mark.usefixtures("fresh_lookups_and_path")
def test_an_egg_directory_alone_is_installed(tmp_path):
    egg = tmp_path / "zzq_egg2-2.0-py3.11.egg"
    _metadata_dir(egg / "EGG-INFO", "zzq_egg2", "2.0", file="PKG-INFO")
    sys.path.insert(0, str(egg))
    assert installed.version("zzq_egg2") == metadata.version("zzq_egg2") == "2.0"  # not None


@pytest.mark.usefixtures("fresh_lookups_and_path")
def test_a_metadata_folder_suffix_in_capitals_is_found_as_importlib_metadata_finds_it(tmp_path):
    _metadata_dir(tmp_path / "ZZQ_UP-3.0.DIST-INFO", "zzq-up", "3.0")
    sys.path.insert(0, str(tmp_path))
    assert installed.version("zzq-up") == metadata.version("zzq-up") == "3.0"  # not None
