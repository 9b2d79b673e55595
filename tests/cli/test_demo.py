"""`gpuplay demo`: bad decks refused before anything runs; a rehearsal records what replay shows."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.decks import load_recording

TINY = """
title = "tiny"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "NumPy"
scenario = "matmul"
params = { n = 64 }
caption = "baseline"
[[steps]]
title = "torch"
scenario = "matmul"
backend = "torch"
params = { n = 64 }
caption = "torch"
[[steps]]
title = "GPU"
scenario = "matmul"
backend = "torch"
device = "cuda:9"
params = { n = 64 }
caption = "a GPU that is not here"
"""


def test_bad_deck_is_refused_with_file_step_and_field(tmp_path, monkeypatch):
    import gpuplay.core.runner as runner

    monkeypatch.setattr(runner, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    deck = tmp_path / "talk.toml"
    deck.write_text(TINY.replace('backend = "torch"', 'backend = "jax"', 1))
    out = tmp_path / "rec.json"
    result = CliRunner().invoke(main, ["demo", str(deck), "--rehearse", "--out", str(out)])
    assert result.exit_code == 1
    assert "talk.toml: step 2: backend: backend must be one of numpy, torch, cupy; got 'jax'" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_option_mistakes_are_usage_errors(tmp_path):
    deck = tmp_path / "talk.toml"
    deck.write_text(TINY)
    r = CliRunner().invoke(main, ["demo", str(deck), "--rehearse"])
    assert r.exit_code == 2 and "--rehearse needs --out" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = CliRunner().invoke(main, ["demo", str(deck), "--replay", str(bad)])
    assert r.exit_code == 1 and "not a gpuplay deck recording" in r.output
    r = CliRunner().invoke(main, ["demo", "no-such-deck"])
    assert r.exit_code == 1 and "shipped decks: gpu-pays-off, numpy-to-gpu, the-7633x-question" in r.output


def test_rehearsal_records_every_step_and_its_conditions(tmp_path):
    deck = tmp_path / "talk.toml"
    deck.write_text(TINY)
    out = tmp_path / "rec.json"
    result = CliRunner().invoke(main, ["demo", str(deck), "--rehearse", "--out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["format"] == "gpuplay-deck-recording/1" and doc["deck"] == "tiny"
    assert doc["recorded"]["device"] and doc["recorded"]["date"]
    assert "torch" in doc["environment"] and "numpy" in doc["environment"]
    rec = load_recording(out)
    statuses = sorted(r.status for r in rec.results.values())
    assert statuses == ["ok", "ok", "refused"]  # NumPy, torch cpu, and the missing cuda:9
    assert "refused" in result.output  # the rehearsal says which step could not run, and why
