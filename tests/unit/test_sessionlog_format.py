"""The session log's format 2: step timings packed (exact, cheap); every reader reads formats 1 and 2."""

from __future__ import annotations

import json
import math
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.core.reports import sessionlog
from gpuplay.core.reports.sessionlog import SessionLog, read_history, read_log
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec

# Written by gpuplay before log format 2 (main at 6694cf5's SessionLog): timings as JSON numbers.
FORMAT1 = Path(__file__).parent / "fixtures" / "session-log-format1.jsonl"
FORMAT1_SAMPLES = [
    [1.25e-05, 1.5e-05, 1.0000000000000002e-05, 0.30000000000000004, 1e-05],
    [2e-05, 2.75e-05, 2.5e-05, 2.25e-05],
]


def _result(samples: list[float], warmup: list[float] | None = None, n: int = 4096) -> RunResult:
    spec = RunSpec.make("elementwise", {"n": n}, scenario="elementwise", backend="numpy", budget_s=0.1)
    return RunResult(
        spec=spec, samples=samples, warmup=warmup or [], size=f"{n}", conditions={"backend": "numpy"}
    )


def _log(directory: Path, name: str = "session-20261127-000000-1.jsonl") -> SessionLog:
    log = SessionLog(directory)
    log.path = directory / name
    return log


def test_a_line_packs_its_timings_exactly_nan_and_inf_kept(tmp_path):
    odd_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_BEEF))[0]
    samples = [1.0000000000000002e-05, 0.1 + 0.2, 5e-324, -0.0, math.inf, odd_nan, 1e308]
    log = _log(tmp_path)
    assert log.append(_result(samples, warmup=[3.5e-05, math.nan]))
    (line,) = log.path.read_text().splitlines()
    raw = json.loads(line)
    assert raw["log_format"] == sessionlog.LOG_FORMAT == 2
    assert set(raw["samples_s"]) == {"f64"} and set(raw["warmup_s"]) == {"f64"}
    (back,) = list(read_log(log.path))
    assert "log_format" not in back  # readers see the dict they always saw: timings as lists of floats
    bits = [struct.pack("<d", x) for x in back["samples_s"]]
    assert bits == [struct.pack("<d", x) for x in samples]  # every bit, the NaN's payload and -0.0 included
    assert back["warmup_s"][0] == 3.5e-05 and math.isnan(back["warmup_s"][1])
    assert back["summary"]["n"] == len(samples)  # the derived figures stay in the line for any reader


def test_a_format_1_log_reads_as_it_always_did_beside_format_2_lines(tmp_path):
    state = tmp_path / "sessions"
    state.mkdir()
    old = state / "session-20261126-120000-1.jsonl"
    shutil.copy(FORMAT1, old)
    assert [d["samples_s"] for d in read_log(old)] == FORMAT1_SAMPLES
    # A new line appended to the old file (a log is only ever appended to): both read.
    log = _log(state, old.name)
    assert log.append(_result([3e-05, 3.5e-05], n=16384))
    problems: list[str] = []
    results = read_history(state, problems)
    assert problems == []
    assert [r.samples for r in results] == [*FORMAT1_SAMPLES, [3e-05, 3.5e-05]]
    assert [r.spec.params["n"] for r in results] == [4096, 8192, 16384]
    assert results[0].median == 1.25e-05 and results[0].warmup == [3.5e-05]


def test_history_and_load_read_both_formats(tmp_path, monkeypatch):
    import gpuplay
    from gpuplay.cli import main

    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    sessions = tmp_path / "state" / "sessions"
    sessions.mkdir(parents=True)
    shutil.copy(FORMAT1, sessions / FORMAT1.name.replace("log-format1", "20261126-120000-1"))
    assert _log(sessions).append(_result([4e-05] * 3, n=32768))
    res = CliRunner().invoke(main, ["history", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["results"]
    assert [r["spec"]["params"]["n"] for r in rows] == [4096, 8192, 32768]
    assert [r["samples_s"] for r in rows] == [*FORMAT1_SAMPLES, [4e-05] * 3]
    loaded = [list(r.samples) for path in sorted(sessions.iterdir()) for r in gpuplay.load(path)]
    assert loaded == [*FORMAT1_SAMPLES, [4e-05] * 3]  # the Python API's load() of each file


def test_a_line_of_a_newer_format_or_with_damaged_timings_is_skipped_and_said(tmp_path):
    log = _log(tmp_path)
    assert log.append(_result([1e-05, 2e-05]))
    good = log.path.read_text()
    newer = good.replace('"log_format": 2', '"log_format": 3')
    cut = good.replace('"samples_s": {"f64": "', '"samples_s": {"f64": "AAAA')
    hostile = good.replace('"log_format": 2', '"log_format": "\\u001b[31m' + "x" * 200 + '"')
    log.path.write_text(good + newer + cut + hostile)
    problems: list[str] = []
    assert len(list(read_log(log.path, problems))) == 1
    text = "\n".join(problems)
    assert "1 line of log format 3 (written by a newer gpuplay?); skipped" in text, text
    assert "1 line with unreadable packed timings; skipped" in text
    assert len(text) < 400  # a hostile format field is cut short (and shown escaped where printed)


def test_the_packed_line_is_smaller_and_written_faster_than_json_numbers(tmp_path):
    import random
    import time

    samples = [1e-05 * (1 + 0.1 * random.random()) for _ in range(20_000)]
    r = _result(samples)
    r.summary  # noqa: B018 - summarised once, as the sweep's front end does before logging
    as_json = json.dumps(r.to_dict(), default=str)
    packed = sessionlog.log_line(r)
    assert len(packed) < 0.6 * len(as_json)

    def cpu(f) -> float:
        best = math.inf
        for _ in range(5):
            t0 = time.process_time()
            f()
            best = min(best, time.process_time() - t0)
        return best

    assert cpu(lambda: sessionlog.log_line(r)) < 0.5 * cpu(lambda: json.dumps(r.to_dict(), default=str))


@pytest.mark.parametrize("bad", ["AAA", "not base64!", "AAAAAAAAAA=="])
def test_packed_timings_that_are_not_whole_float64s_raise_value_error(bad):
    from gpuplay.core.measure.packed import unpack

    with pytest.raises(ValueError):
        unpack({"f64": bad})


# -- the fsync: off the way to the next measurement ------------------------------------------------
def test_append_returns_with_the_line_written_before_its_fsync_ends(tmp_path, monkeypatch):
    """A sweep point waited for the disk (~1-1.5 ms a line here) before the next could start; the
    line is written whole at once (a killed gpuplay loses nothing) and fsynced on a thread."""
    import os
    import threading

    release, synced = threading.Event(), []
    real = os.fsync

    def slow_fsync(fd: int) -> None:
        release.wait(10)
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    log = _log(tmp_path)
    done = threading.Event()
    threading.Thread(target=lambda: log.append(_result([1e-05])) and done.set(), daemon=True).start()
    try:
        assert done.wait(5), "append waited for the disk"
        assert [d["samples_s"] for d in read_log(log.path)] == [[1e-05]]  # written before any fsync
        assert not log.sync(timeout=0.05)  # the fsync is still going
    finally:
        release.set()
    assert log.sync(timeout=10) and synced


def test_a_failed_fsync_is_said_at_the_next_append(tmp_path, monkeypatch):
    import errno
    import os

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    log = _log(tmp_path)
    monkeypatch.setattr(os, "fsync", failing)
    assert log.append(_result([1e-05]))
    assert log.sync(timeout=10)
    monkeypatch.undo()
    assert not log.append(_result([2e-05]))  # written, but the earlier line may not be on disk: said
    assert log.error is not None and "not saved to disk" in log.error and "Input/output error" in log.error
    assert log.append(_result([3e-05]))  # said once: the next append says its own (the disk is back)
    assert [d["samples_s"] for d in read_log(log.path)] == [[1e-05], [2e-05], [3e-05]]


def test_a_log_removed_before_its_fsync_is_no_disk_failure(tmp_path, monkeypatch):
    """`rm` of the session log while its last line's fsync waits its turn (CI saw it: a test that
    removes the log and appends again read False): the fsync finds no file, which is no disk
    fault; the next append writes a new file and says True."""
    import os
    import threading

    release, real = threading.Event(), os.fsync
    blocker = _log(tmp_path, "session-20261127-000000-2.jsonl")

    def held(fd: int) -> None:
        release.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fsync", held)
    assert blocker.append(_result([1e-05]))  # the syncer's thread now waits in this fsync
    log = _log(tmp_path)
    try:
        assert log.append(_result([2e-05]))  # its fsync queued behind the other
        log.path.unlink()
    finally:
        release.set()
    assert log.sync(timeout=10)
    monkeypatch.undo()
    assert log.append(_result([3e-05]))
    assert log.error is None
    assert [d["samples_s"] for d in read_log(log.path)] == [[3e-05]]


def test_the_process_exit_waits_for_the_last_fsync(tmp_path):
    import subprocess
    import sys

    marker = tmp_path / "synced"
    code = f"""
import os, time
real = os.fsync
def slow(fd):
    time.sleep(0.3)
    real(fd)
    open({str(marker)!r}, "w").write("synced")
os.fsync = slow
from pathlib import Path
from gpuplay.core.result import RunResult
from gpuplay.core.reports.sessionlog import SessionLog
from gpuplay.core.spec import RunSpec
log = SessionLog(Path({str(tmp_path)!r}))
assert log.append(RunResult(spec=RunSpec.make("elementwise", {{"n": 64}}), samples=[1e-05]))
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert marker.read_text() == "synced"


def _exit_with(tmp_path: Path, fsync_body: str, exit_sync_s: float = 10.0) -> tuple[float, str]:
    import subprocess
    import sys
    import time

    code = f"""
import errno, os, time
def fsync(fd):
    {fsync_body}
os.fsync = fsync
from pathlib import Path
from gpuplay.core.reports import sessionlog
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
sessionlog.EXIT_SYNC_S = {exit_sync_s}
log = SessionLog = sessionlog.SessionLog(Path({str(tmp_path)!r}))
assert log.append(RunResult(spec=RunSpec.make("elementwise", {{"n": 64}}), samples=[1e-05]))
"""
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return time.monotonic() - t0, out.stderr


def test_the_last_line_s_failed_fsync_is_said_at_exit(tmp_path):
    """a failed fsync was said only at the next append, so the last line's (a sweep's
    last point, a single `run`) went unsaid: the exit waited for it, then said nothing."""
    _, err = _exit_with(tmp_path, 'raise OSError(errno.EIO, "Input/output error")')
    assert "session log not saved to disk" in err and "Input/output error" in err


def test_an_fsync_still_going_at_exit_is_waited_for_a_while_then_said(tmp_path):
    took, err = _exit_with(tmp_path, "time.sleep(30)", exit_sync_s=0.5)
    assert took < 20  # not the 30 s of the fsync
    assert "not yet saved to disk" in err
