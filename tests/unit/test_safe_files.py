"""User files that are not what they claim (a FIFO, a folder, a huge or non-UTF-8 file, JSON nested
ten thousand deep) are named and refused; nothing waits forever. The FIFO tests run gpuplay in a
subprocess under a timeout, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.storage.config import load_config
from gpuplay.core.storage.safeload import FileReadError, read_text_file

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def gpuplay(*args: str, cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})  # fmt: skip


# -- the reader ------------------------------------------------------------------------------
@needs_fifo
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "x.toml"
    os.mkfifo(fifo)
    code = f"from gpuplay.core.storage.safeload import read_text_file\ntry: read_text_file({str(fifo)!r})\nexcept OSError as e: print(e)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == f"{fifo}: not a regular file (a FIFO)", proc.stderr


def test_reads_text_and_names_what_is_wrong(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("name = 'é'\n", encoding="utf-8")
    assert read_text_file(good) == "name = 'é'\n"
    link = tmp_path / "link.toml"
    link.symlink_to(good)
    assert read_text_file(link) == "name = 'é'\n"  # links are a normal way to share a file
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": \xff}')
    with pytest.raises(FileReadError, match=r"bad\.json: not UTF-8 text \(invalid start byte at byte 6\)"):
        read_text_file(bad)
    with pytest.raises(FileReadError, match="a folder, not a file"):
        read_text_file(tmp_path)
    with pytest.raises(FileReadError, match="no such file"):
        read_text_file(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(FileReadError, match="larger than"):
        read_text_file(big, max_bytes=1024)


# -- loaders: a bad file in a folder is named and skipped ------------------------------------
@needs_fifo
def test_scenario_folder_with_a_fifo_still_loads_the_rest(tmp_path):
    os.mkfifo(tmp_path / "x.toml")
    code = ("from gpuplay.core.catalogue.scenarios import load_scenarios\n"
            f"s = load_scenarios([{str(tmp_path)!r}])\nprint(len(s.scenarios) > 0, *map(str, s.errors))")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.startswith("True "), proc.stderr
    assert "x.toml" in proc.stdout and "not a regular file (a FIFO)" in proc.stdout


def test_scenario_folder_with_a_non_utf8_file_names_it(tmp_path):
    (tmp_path / "latin.toml").write_bytes(b"name = '\xe9'\n")
    s = load_scenarios([tmp_path])
    assert s.scenarios  # the built-in ones still load
    assert any("latin.toml" in str(e) and "not UTF-8" in str(e) for e in s.errors)


@needs_fifo
def test_every_command_survives_a_fifo_config(tmp_path):
    os.mkfifo(tmp_path / "config.toml")
    proc = gpuplay("list", cwd=tmp_path, env={"GPUPLAY_CONFIG_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert "config.toml: not read (not a regular file (a FIFO)); using defaults" in proc.stderr


def test_config_folder_in_place_of_the_file(tmp_path):
    (tmp_path / "config.toml").mkdir()
    cfg = load_config(tmp_path / "config.toml")
    assert cfg.problems == [f"{tmp_path / 'config.toml'}: not read (a folder, not a file); using defaults"]


# -- files named on the command line: exit 2 with the reason ---------------------------------
@needs_fifo
@pytest.mark.parametrize(
    "args",
    [
        ["compare", "--from", "fifo.json"],
        ["--scenarios", "fifodir", "list"],
        ["demo", "fifodir/x.toml"],
        ["demo", "numpy-to-gpu", "--replay", "fifo.json"],
    ],
)
def test_a_fifo_on_the_command_line_does_not_hang(tmp_path, args):
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "fifodir").mkdir()
    os.mkfifo(tmp_path / "fifodir" / "x.toml")
    proc = gpuplay(*args, cwd=tmp_path)
    assert "not a regular file (a FIFO)" in proc.stderr
    if args[0] in ("compare", "demo"):
        assert proc.returncode == 2 and ("fifo.json" in proc.stderr or "x.toml" in proc.stderr)


def test_deeply_nested_json_is_a_usage_error_not_a_traceback(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 10_000)
    proc = gpuplay("compare", "--from", "deep.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "deep.json: not a readable JSON file (nested too deeply" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("content", "reason"), [(b"{not json", "not a readable JSON file"), (b"\xff\xfe", "not UTF-8 text")]
)
def test_bad_result_files_exit_2(tmp_path, content, reason):
    (tmp_path / "bad.json").write_bytes(content)
    proc = gpuplay("compare", "--from", "bad.json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "bad.json" in proc.stderr and reason in proc.stderr


def test_a_missing_file_is_still_file_not_found(tmp_path):
    # Loaders with their own words for a missing file (`except FileNotFoundError`) keep them.
    with pytest.raises(FileNotFoundError) as info:
        read_text_file(tmp_path / "gone.toml")
    assert str(info.value) == f"{tmp_path / 'gone.toml'}: no such file"


@needs_fifo
def test_a_fifo_calibration_cache_is_unreadable_not_a_hang(tmp_path):
    code = (
        "from gpuplay.core.measure import roofline\n"
        "import os; os.mkfifo(roofline.cache_path('cpu'))\n"
        "print(roofline.load_peaks('cpu').problem)"
    )
    (tmp_path / "roofline").mkdir()
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "unreadable (not a regular file (a FIFO)): re-run gpuplay calibrate" in proc.stdout, proc.stderr
