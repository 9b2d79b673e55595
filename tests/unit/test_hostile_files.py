"""Hostile files, read for real from disk: each is named and skipped, the rest load, nothing raises.

Deep nesting, NaN and infinity, non-UTF-8 bytes, a FIFO or a folder where a file should be, a torn
last line, control characters, a corrupt calibration cache, a runaway engine.log.
"""

from __future__ import annotations

import json
import math
import os
import threading

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.measure.roofline import load_peaks, roof_for
from gpuplay.core.reports.decks import DeckError, load_deck, load_recording
from gpuplay.core.reports.merge import MergeError, load_source
from gpuplay.core.reports.sessionlog import SessionLog, read_history, read_log
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec, SpecError
from gpuplay.core.storage import bounds
from gpuplay.core.storage.config import load_config
from gpuplay.core.storage.safetext import visible

DEEP = 10_000


def deep_toml_value() -> str:
    return "[" * DEEP + "]" * DEEP


# -- 4: deep nesting ---------------------------------------------------------------------
def test_a_deeply_nested_scenario_is_named_and_the_rest_load(tmp_path):
    (tmp_path / "deep.toml").write_text(
        f'name = "deep"\nworkload = "matmul"\n[params]\nn = {deep_toml_value()}\n'
    )
    (tmp_path / "fine.toml").write_text('name = "fine"\nworkload = "matmul"\n')
    sset = load_scenarios([tmp_path])
    assert "fine" in sset.scenarios
    assert [e.path.name for e in sset.errors] == ["deep.toml"]
    assert "nested too deeply" in str(sset.errors[0])


def test_deep_nesting_in_config_deck_recording_and_result_files(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"scenario_dirs = {deep_toml_value()}\n")
    assert "nested too deeply" in load_config(cfg).problems[0]

    deck = tmp_path / "deck.toml"
    deck.write_text(f'title = "t"\nsteps = {deep_toml_value()}\n')
    with pytest.raises(DeckError, match="deck.toml.*nested too deeply"):
        load_deck(deck, load_scenarios())

    deep_json = tmp_path / "deep.json"
    deep_json.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(ValueError, match="deep.json.*nested too deeply"):
        load_recording(deep_json)
    with pytest.raises(MergeError, match="deep.json.*nested too deeply"):
        load_source(deep_json)


# -- 5: history over bad logs ------------------------------------------------------------
def _good_result() -> RunResult:
    spec = RunSpec.make("elementwise", {"n": 1000}, budget_s=0.01)
    return RunResult(spec=spec, status="ok", samples=[1e-3, 1.1e-3], size="1,000")


def test_history_skips_and_names_every_bad_log(tmp_path):
    log = SessionLog(tmp_path)
    assert log.append(_good_result())
    (tmp_path / "session-20200101-000000-1.jsonl").write_bytes(b"\xff\xfe not utf-8\n")
    (tmp_path / "session-20200101-000001-2.jsonl").write_text('[1, 2]\n"text"\n')
    (tmp_path / "session-20200101-000002-3.jsonl").mkdir()
    os.mkfifo(tmp_path / "session-20200101-000003-4.jsonl")  # no writer: opening must not wait
    problems: list[str] = []
    done: list[list[RunResult]] = []
    t = threading.Thread(target=lambda: done.append(read_history(tmp_path, problems)), daemon=True)
    t.start()
    t.join(10)
    assert done, "read_history hung (a FIFO in the sessions folder?)"
    assert len(done[0]) == 1
    text = "\n".join(problems)
    assert "session-20200101-000000-1.jsonl: 1 line not UTF-8" in text
    assert "session-20200101-000001-2.jsonl: 2 lines not an object" in text
    assert "session-20200101-000002-3.jsonl: not a regular file" in text
    assert "session-20200101-000003-4.jsonl: not a regular file" in text


def test_a_torn_last_line_is_reported_not_silently_dropped(tmp_path):
    log = SessionLog(tmp_path)
    assert log.append(_good_result())
    with open(log.path, "a") as f:
        f.write('{"spec": {"workload": "elem')  # the process died mid-write
    problems: list[str] = []
    assert len(list(read_log(log.path, problems))) == 1
    assert problems == [
        f"{log.path.name}: last line torn (the disk was full or gpuplay was killed mid-write); skipped"
    ]


def test_a_full_disk_leaves_no_torn_line(tmp_path, monkeypatch):
    """A short write (ENOSPC) is cut back: the next line starts on a line of its own."""
    from gpuplay.core.storage.atomicfile import append_line

    path = tmp_path / "log.jsonl"
    append_line(path, '{"a": 1}')
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))
    with pytest.raises(OSError):
        append_line(path, '{"b": 2, "long": "' + "x" * 100 + '"}')
    monkeypatch.setattr(os, "write", real_write)
    append_line(path, '{"c": 3}')
    problems: list[str] = []
    assert [d for d in read_log(path, problems)] == [{"a": 1}, {"c": 3}]
    assert problems == []


# -- 6: numbers --------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["budget_s", "max_step_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e-300, 1e300])
def test_spec_numbers_are_finite_and_bounded(field, value):
    with pytest.raises(SpecError):
        RunSpec.make("elementwise", {"n": 1000}, **{field: value})


@pytest.mark.parametrize(("field", "value"), [("warmup", 10**9), ("repeat", 10**9), ("seed", -1)])
def test_spec_counts_are_bounded(field, value):
    with pytest.raises(SpecError):
        RunSpec.make("elementwise", {"n": 1000}, **{field: value})


def test_a_deck_with_a_nan_budget_is_named(tmp_path):
    deck = tmp_path / "nan.toml"
    deck.write_text(
        'title = "t"\n[[steps]]\ntitle = "s"\ncaption = "c"\nscenario = "elementwise"\nbudget_s = nan\n'
    )
    with pytest.raises(DeckError, match="nan.toml.*budget"):
        load_deck(deck, load_scenarios())


@pytest.mark.parametrize("interval", ["inf", "nan", "1e-300", "1e9", "-1", '"fast"'])
def test_config_sample_interval_finite_and_bounded(tmp_path, interval):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"sample_interval = {interval}\n")
    loaded = load_config(cfg)
    assert loaded.sample_interval == 0.5
    assert "sample_interval" in loaded.problems[0]


def test_check_number_names_what_is_wrong():
    assert bounds.check_number("x", 2.0, (1, 3)) == 2.0
    with pytest.raises(bounds.BoundsError, match="x must be a finite number; got nan"):
        bounds.check_number("x", math.nan, (1, 3))
    with pytest.raises(bounds.BoundsError, match="between 1 and 3"):
        bounds.check_number("x", 4, (1, 3))
    with pytest.raises(bounds.BoundsError, match="whole number"):
        bounds.check_number("x", 2.5, (1, 3), integer=True)
    with pytest.raises(bounds.BoundsError, match="a number"):
        bounds.check_number("x", True, (0, 3))


# -- 3: control characters ---------------------------------------------------------------
def test_visible_shows_every_control_character():
    hostile = "a\x1b[31mb\x07\x00\x7f\x9b\u202ez"
    shown = visible(hostile)
    assert shown == "a␛[31mb\\x07\\x00\\x7f\\x9b\\u202ez"
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in shown)
    assert visible("two\nlines\tand tab") == "two\nlines\tand tab"
    assert visible("two\nlines", one_line=True) == "two\\x0alines"
    assert visible(42) == "42"


# -- 2: the calibration cache ------------------------------------------------------------
def _write_cache(state, mutate):
    from gpuplay.core.hw.system import cpu_name
    from gpuplay.core.measure.roofline import DevicePeaks, Measurement, cache_path, fingerprint, save_peaks

    peaks = DevicePeaks(
        "cpu", cpu_name(), fingerprint("cpu", cpu_name()), "2026-01-01", 1.0,
        [Measurement("memory", "triad", "numpy", 10.0, "3 x 1 MiB", 0.1, 3),
         Measurement("compute", "float32", "numpy", 100.0, "n=512", 0.1, 3)],
    )  # fmt: skip
    save_peaks(peaks)
    path = cache_path("cpu")
    d = json.loads(path.read_text())
    mutate(d)
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["measurements"][0].update(value="fast"),
        lambda d: d["measurements"][0].update(value=float("nan")),
        lambda d: d["measurements"][1].update(value=-5),
        lambda d: d["measurements"][0].update(kind="bogus"),
        lambda d: d.update(measurements=[1, 2]),
    ],
)
def test_a_corrupt_calibration_cache_is_reported_and_ignored(mutate):
    _write_cache(None, mutate)
    lookup = load_peaks("cpu")
    assert lookup.peaks is None
    assert "calibration cache" in lookup.problem and "re-run gpuplay calibrate" in lookup.problem
    roof = roof_for(device="cpu", device_name=None, compute_dtype="float32", tf32=False,
                    flops=1e6, nbytes=1e6, seconds=1e-3)  # fmt: skip
    assert roof["status"] == "not calibrated"
    assert "unreadable" in roof["note"]


# -- 8: engine.log -----------------------------------------------------------------------
def test_engine_log_is_cut_to_its_tail_and_read_by_its_tail(tmp_path):
    from gpuplay.core.engine.client import cap_log, read_tail

    log = tmp_path / "engine.log"
    line = b"chatty line from a user step\n"
    with open(log, "wb") as f:
        f.write(line * (12 * 2**20 // len(line)))
        f.write(b"Fatal Python error: the last words\n")
    cap_log(log, cap=10 * 2**20, keep=2**20)
    assert log.stat().st_size <= 2**20 + 100
    text = log.read_bytes()
    assert text.startswith(b"--- gpuplay: engine.log was cut")
    assert text.endswith(b"Fatal Python error: the last words\n")
    tail = read_tail(log, 1000)
    assert len(tail) == 1000 and tail.endswith(b"the last words\n")
    small = tmp_path / "small.log"
    small.write_bytes(b"short\n")
    cap_log(small, cap=100)
    assert small.read_bytes() == b"short\n"
