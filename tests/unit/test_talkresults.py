"""A talk tab's measured results survive a reload: saved whole, read back bounded and checked."""

from __future__ import annotations

import json
import os
import time

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import TALK_SESSION_ENV, parse_deck, save_position
from gpuplay.core.reports.talkresults import load_results, prune_stale, results_file, save_results
from gpuplay.core.result import RunResult

DECK = """
title = "t"
preset = "quick"
[[steps]]
title = "NumPy"
scenario = "matmul"
caption = "baseline"
[[steps]]
title = "torch"
scenario = "matmul"
backend = "torch"
caption = "c"
"""
TAB = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def deck(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv(TALK_SESSION_ENV, TAB)
    return parse_deck(DECK, load_scenarios(), str(tmp_path / "talk.toml"))


def _ok(spec) -> RunResult:
    return RunResult(spec, samples=[0.010, 0.011, 0.012, 0.011, 0.0105], size="1024×1024")


def test_saved_results_come_back_by_spec(deck):
    measured = {s.spec: _ok(s.spec) for s in deck.steps}
    assert save_results(deck, measured) is None
    assert TAB in results_file(deck).name  # the tab's own file, beside its position
    back, problem = load_results(deck)
    assert problem is None
    assert set(back) == {s.spec for s in deck.steps}
    assert back[deck.steps[1].spec].median == pytest.approx(0.011)


def test_no_file_is_no_results_and_no_message(deck):
    assert load_results(deck) == ({}, None)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 100_000, "nested too deeply"),
        ("not json", "earlier figures ignored"),
        ('{"format": "other"}', "not a talk results file"),
        ('{"format": "gpuplay-talk-results/1", "results": 5}', "no list"),
        (b"\xff\xfe".decode("latin-1"), "earlier figures ignored"),
    ],
)
def test_a_hostile_file_is_ignored_with_one_line(deck, text, words):
    path = results_file(deck)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    back, problem = load_results(deck)
    assert back == {} and problem is not None and words in problem and "\n" not in problem


def test_nan_and_unbounded_samples_are_dropped(deck):
    one, two = (s.spec for s in deck.steps)
    good = {"key": one.to_dict(), "result": _ok(one).to_dict()}
    nan = {"key": two.to_dict(), "result": dict(_ok(two).to_dict(), samples_s=[float("nan")] * 5)}
    huge = {"key": two.to_dict(), "result": dict(_ok(two).to_dict(), samples_s=[1e300] * 5)}
    bad = {"key": {"spec": 3}, "result": {}}
    text = json.dumps({"format": "gpuplay-talk-results/1", "results": [good, nan, huge, bad]})
    results_file(deck).parent.mkdir(parents=True, exist_ok=True)
    results_file(deck).write_text(text)  # json.dumps writes NaN: Python's json reads it back
    back, problem = load_results(deck)
    assert list(back) == [deck.steps[0].spec]
    assert problem is not None and "3 malformed" in problem


def test_a_fifo_is_not_waited_on(deck):
    results_file(deck).parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(results_file(deck))
    back, problem = load_results(deck)
    assert back == {} and problem is not None and "FIFO" in problem


def test_stale_tab_files_are_pruned_and_fresh_ones_kept(deck, monkeypatch):
    save_position(deck, 0)
    save_results(deck, {deck.steps[0].spec: _ok(deck.steps[0].spec)})
    folder = results_file(deck).parent
    old = folder / ("talk-000000000000-" + "a" * 32 + ".json")
    old_results = folder / ("talk-000000000000-" + "a" * 32 + ".results.json")
    terminal = folder / "talk-000000000000.json"  # a terminal talk's own step: never pruned
    week_ago = time.time() - 8 * 86_400
    for p in (old, old_results, terminal):
        p.write_text("{}")
        os.utime(p, (week_ago, week_ago))
    assert prune_stale(deck) == 2
    assert not old.exists() and not old_results.exists() and terminal.exists()
    assert results_file(deck).exists()
