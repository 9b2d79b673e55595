"""Review r2b: core/storage/installed.py answers where importlib.metadata.version answers otherwise."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from gpuplay.core.storage import installed


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


# -- core/measure/noise.py: /proc read as psutil reads it --------------------------------------------

import builtins  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402

from gpuplay.core.measure import noise  # noqa: E402


def _proc_stat_without_btime(monkeypatch) -> None:
    """noise reads a /proc/stat holding this machine's cpu line and nothing else (a container's)."""
    with open("/proc/stat", "rb") as f:
        cpu_line = f.readline()

    def no_btime(path, *a, **k):
        if path == "/proc/stat":
            return io.BytesIO(cpu_line)
        return builtins.open(path, *a, **k)

    monkeypatch.setattr(noise, "open", no_btime, raising=False)


@pytest.mark.skipif(not os.path.isfile("/proc/stat"), reason="Linux /proc")
def test_a_proc_stat_without_btime_and_no_psutil_still_measures_the_window(monkeypatch):
    """A container's /proc/stat with its cpu line but no btime (12f5943: "names nobody instead of
    failing the window"): the window's start reads /proc, the listing finds no btime, and the end
    must still read the machine's CPU times from /proc, which has not failed."""
    _proc_stat_without_btime(monkeypatch)
    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "psutil", None)  # not installed
    monkeypatch.setitem(sys.modules, "psutil", None)
    monkeypatch.setattr(noise, "_boot", None)
    monkeypatch.setattr(noise, "_end_listing", None)
    a = noise.host_mark(listing=True)
    assert a is not None
    b = noise.host_mark(a)
    assert b is not None  # r2: None, proc_boot_time turned /proc off for the cpu line too
    assert noise.host_noise(a, b).get("cores")


# -- core/engine/client.py: _wait_gone's pidfd --------------------------------------------------

import subprocess  # noqa: E402
import time  # noqa: E402

from gpuplay.core.engine import client as engine_client  # noqa: E402


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="Linux pidfd")
def test_wait_gone_with_a_pidfd_numbered_past_select_s_limit_still_waits(monkeypatch):
    """A command holding over 1024 descriptors (a raised RLIMIT_NOFILE, many result files open)
    gets a pidfd select.select cannot take: ValueError, which escaped `_reap` and left the engine
    and its group unkilled at exit."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    real = os.pidfd_open
    high = []

    def pidfd_open(pid, flags=0):
        fd = real(pid, flags)
        hi = os.dup2(fd, 1500)
        os.close(fd)
        high.append(hi)
        return hi

    monkeypatch.setattr(os, "pidfd_open", pidfd_open)
    c = engine_client.EngineClient()
    c._proc = proc
    try:
        t0 = time.monotonic()
        c._wait_gone(2.0)  # r2: ValueError: filedescriptor out of range in select()
        assert high and proc.poll() is not None and time.monotonic() - t0 < 1.5
    finally:
        c._proc = None
        proc.kill()
        proc.wait()


def test_a_released_engine_that_was_never_asked_is_not_waited_for_at_close():
    """release() on an engine that was sent nothing (`_asked` False: a command stopped before its
    request) sends no Shutdown but marks it released; close() then waited WAIT_POLITELY_S (0.2 s)
    for an engine that had not been told to end, before killing it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    c = engine_client.EngineClient()
    c._proc = proc
    try:
        c.release()
        t0 = time.monotonic()
        c.close(wait=False)
        took = time.monotonic() - t0
        assert proc.poll() is not None
        assert took < engine_client.WAIT_POLITELY_S / 2, took  # r2: ~0.2 s
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not os.path.isfile("/proc/stat"), reason="Linux /proc")
def test_a_proc_stat_without_btime_with_psutil_installed_names_nobody_rather_than_failing(monkeypatch):
    """The same /proc/stat with psutil installed: psutil.boot_time() raises RuntimeError ("line
    'btime' not found"), which escaped host_mark and failed the run's window."""
    psutil = pytest.importorskip("psutil")
    _proc_stat_without_btime(monkeypatch)

    def psutil_boot_time():
        raise RuntimeError("line 'btime' not found in /proc/stat")

    monkeypatch.setattr(psutil, "boot_time", psutil_boot_time)
    monkeypatch.setattr(noise, "_proc_host", True)
    monkeypatch.setattr(noise, "psutil", psutil)
    monkeypatch.setattr(noise, "_boot", None)
    monkeypatch.setattr(noise, "_end_listing", None)
    a = noise.host_mark(listing=True)  # r2: RuntimeError
    b = noise.host_mark(a)
    assert a is not None and b is not None and a.procs == {} and noise.host_noise(a, b).get("cores")
