"""Demo decks: validation names file, step and field; shipped decks load; recordings round-trip."""

from __future__ import annotations

import json

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.reports.decks import (
    DeckError,
    RecordingError,
    builtin_decks_dir,
    load_deck,
    load_recording,
    needed_specs,
    parse_deck,
    recording_json,
    resolve_deck_path,
)
from gpuplay.core.result import RunResult

GOOD = """
title = "t"
preset = "quick"
[defaults]
budget_s = 0.5
[[steps]]
title = "NumPy"
scenario = "matmul"
caption = "baseline"
[[steps]]
title = "torch"
scenario = "matmul"
backend = "torch"
dtype = "float64"
params = { n = 128 }
caption = "c"
notes = "n"
[steps.recorded]
median_ms = 2.5
speedup = 3
device = "GPU X"
source = "somewhere"
"""


@pytest.fixture(scope="module")
def scenarios():
    return load_scenarios()


def test_good_deck(scenarios):
    deck = parse_deck(GOOD, scenarios, "good.toml")
    assert deck.title == "t" and len(deck.steps) == 2
    first, second = deck.steps
    assert first.spec.backend == "numpy" and first.spec.params["n"] == 1024  # matmul's quick preset
    assert first.spec.budget_s == 0.5  # from [defaults]
    assert second.spec.backend == "torch" and second.spec.dtype == "float64"
    assert second.spec.params["n"] == 128 and second.notes == "n"
    assert second.recorded is not None and second.recorded.median_s == pytest.approx(2.5e-3)
    # NumPy float64 at n=128 is the torch step's baseline: listed once, before it
    specs = needed_specs(deck)
    assert specs[0] == first.spec and specs[-1] == second.spec and len(specs) == 3


def test_preset_override_drops_recorded_figures(scenarios):
    deck = parse_deck(
        GOOD.replace('preset = "quick"', 'preset = "published"'), scenarios, "good.toml", "quick"
    )
    assert deck.steps[0].spec.params["n"] == 1024
    assert deck.steps[1].recorded is None  # measured at the deck's size, not this one
    sized = GOOD.replace('preset = "quick"', 'preset = "published"').replace(
        'source = "somewhere"', 'source = "somewhere"\nsize = "n = 4096"'
    )
    kept = parse_deck(sized, scenarios, "good.toml", "quick").steps[1].recorded
    assert kept is not None and kept.size == "n = 4096"  # it says its own size: kept, labelled


@pytest.mark.parametrize(
    ("change", "where", "words"),
    [
        (('backend = "torch"', 'backend = "jax"'), "step 2: backend", "must be one of numpy, torch, cupy"),
        (
            ('scenario = "matmul"\ncaption = "baseline"', 'scenario = "nope"\ncaption = "b"'),
            "step 1: scenario",
            "unknown scenario 'nope'",
        ),
        (('caption = "c"', ""), "step 2: caption", "missing (required)"),
        (('notes = "n"', 'notez = "n"'), "step 2: notez", "unknown field"),
        (('dtype = "float64"', "dtype = 64"), "step 2: dtype", "must be a str"),
        (("params = { n = 128 }", "params = { n = -1 }"), "step 2: params", "n"),
        (("params = { n = 128 }", "params = { q = 1 }"), "step 2: params", "q"),
        (("median_ms = 2.5", "median_ms = -1"), "step 2: recorded.median_ms", "positive"),
        (('device = "GPU X"', ""), "step 2: recorded.device", "missing"),
        (("budget_s = 0.5", "budget_s = 0"), "step 1: budget_s", "budget must be > 0"),
        (("[defaults]", "[defaults]\nwarp = 9"), "defaults.warp", "unknown field"),
        (('title = "t"', 'title = "t"\nslides = 3'), "slides", "unknown field"),
        (('preset = "quick"', 'preset = "huge"'), "step 1: preset", "no preset 'huge'"),
        (("[[steps]]", "[[steps]"), "", "not valid TOML"),
        (('source = "somewhere"', 'statistic = "average"'), "step 2: recorded.statistic", "median, mean"),
    ],
)
def test_bad_deck_names_file_step_and_field(scenarios, change, where, words):
    old, new = change
    assert old in GOOD
    with pytest.raises(DeckError) as info:
        parse_deck(GOOD.replace(old, new, 1), scenarios, "talk.toml")
    msg = str(info.value)
    assert msg.startswith("talk.toml: "), msg
    assert where in msg and words in msg, msg


def test_deck_without_steps(scenarios):
    with pytest.raises(DeckError, match=r"talk.toml: steps: missing"):
        parse_deck('title = "x"\n', scenarios, "talk.toml")


def test_missing_deck_file_lists_shipped_decks(scenarios, tmp_path):
    with pytest.raises(DeckError, match="numpy-to-gpu"):
        load_deck(tmp_path / "nope.toml", scenarios)


@pytest.mark.parametrize("name", ["numpy-to-gpu", "the-7633x-question", "levers-ladder"])
@pytest.mark.parametrize("preset", [None, "quick"])
def test_shipped_decks_load(scenarios, name, preset):
    deck = load_deck(resolve_deck_path(name), scenarios, preset)
    assert len(deck.steps) >= 5
    assert any(s.spec.device.startswith("cuda") for s in deck.steps)
    assert all(s.caption and s.title for s in deck.steps)


def test_decks_are_not_scenarios(scenarios):
    assert builtin_decks_dir().is_dir()
    assert not scenarios.errors  # a deck in scenarios/ would be a broken scenario
    deck_names = {p.stem for p in builtin_decks_dir().glob("*.toml")}
    assert deck_names and not deck_names & set(scenarios.scenarios)


def test_recording_round_trip(scenarios, tmp_path):
    deck = parse_deck(GOOD, scenarios, "good.toml")
    ok = RunResult(deck.steps[0].spec, samples=[0.010, 0.011, 0.012], size="1024×1024")
    refused = RunResult(deck.steps[1].spec, status="refused", message="no GPU here")
    path = tmp_path / "rec.json"
    path.write_text(recording_json(deck, [ok, refused]))
    rec = load_recording(path)
    assert rec.label.startswith("recorded on ") and rec.date[:2] == "20"
    assert "numpy" in rec.environment and "python" in rec.environment  # versions kept
    assert rec.get(deck.steps[0].spec).median == pytest.approx(0.011)
    assert rec.get(deck.steps[1].spec).status == "refused"


def test_bad_recordings(tmp_path):
    with pytest.raises(RecordingError, match="no such file"):
        load_recording(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(RecordingError, match="not JSON"):
        load_recording(bad)
    bad.write_text(json.dumps({"results": []}))
    with pytest.raises(RecordingError, match="not a gpuplay deck recording"):
        load_recording(bad)
    bad.write_text(
        json.dumps(
            {
                "format": "gpuplay-deck-recording/1",
                "results": [{"spec": {"workload": "matmul", "backend": "jax"}}],
            }
        )
    )
    with pytest.raises(RecordingError, match="result 1 is malformed"):
        load_recording(bad)


def test_recording_carries_preset_and_step_parameters(scenarios, tmp_path):
    deck = parse_deck(GOOD.replace('preset = "quick"', 'preset = "published"'), scenarios, "g.toml", "quick")
    path = tmp_path / "rec.json"
    path.write_text(recording_json(deck, [RunResult(deck.steps[0].spec, samples=[0.01] * 3)]))
    doc = json.loads(path.read_text())
    assert doc["preset"] == "quick" and doc["steps"][0]["params"] == {"n": 1024}
    rec = load_recording(path)
    assert rec.preset == "quick" and rec.step_specs == tuple(s.spec for s in deck.steps) and not rec.missing
    # The deck at its own preset names other sizes; the recording still finds what it measured.
    own = parse_deck(GOOD.replace('preset = "quick"', 'preset = "published"'), scenarios, "g.toml")
    assert own.steps[0].spec != deck.steps[0].spec
    assert rec.spec_for(0, own.steps[0].spec) == deck.steps[0].spec


def test_caption_names_the_threads_cores_and_size_that_ran(scenarios):
    from gpuplay.core.reports.decks import caption_text

    deck = parse_deck(
        GOOD.replace('caption = "baseline"', 'caption = "on {threads} of {cores}, {size} {x}"'),
        scenarios,
        "g.toml",
    )
    assert caption_text(deck.steps[0], 1, 2) == "on 1 thread of 2 cores, 1024×1024 {x}"
    assert caption_text(deck.steps[0], None, 8).startswith("on the libraries' default threads of 8 cores")


def test_the_7633x_deck_runs_every_cpu_step_within_its_limits_with_the_quick_preset(scenarios):
    """The deck's point is made live on a CPU-only laptop: no CPU step is refused by the step limit."""
    from gpuplay.core.reports.decks import caption_text
    from gpuplay.core.runner import run

    deck = load_deck(resolve_deck_path("the-7633x-question"), scenarios, "quick")
    for step in deck.steps:
        assert "every core" not in step.caption  # the threads are filled in from the run
        assert "{" not in caption_text(step, 1, 2)
        if step.spec.device != "cpu":
            continue
        r = run(step.spec.replace(budget_s=0.05, warmup=0, min_repeat=1, threads=1))
        assert r.status == "ok", f"{step.title}: {r.message}"
        assert r.estimate_s is not None and r.estimate_s < step.spec.max_step_s
    gpu = deck.steps[3]
    assert gpu.recorded is not None and gpu.recorded.statistic == "mean" and "128²" in gpu.recorded.size
