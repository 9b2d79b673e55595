"""`gpuplay demo`: bad decks refused before anything runs; a rehearsal records what replay shows."""

from __future__ import annotations

import json

from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.reports.decks import load_recording

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
    assert result.exit_code == 2  # a usage error, as `serve --demo` refuses it
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
    assert r.exit_code == 2 and "not a gpuplay deck recording" in r.output
    r = CliRunner().invoke(main, ["demo", "no-such-deck"])
    assert (
        r.exit_code == 2
        and "shipped decks: gpu-pays-off, inference-runtimes, levers-ladder, numpy-to-gpu, the-7633x-question"
        in r.output
    )


def test_a_deck_with_a_non_finite_budget_is_a_usage_error(tmp_path):
    deck = tmp_path / "nandeck.toml"
    deck.write_text(TINY.replace("budget_s = 0.05", "budget_s = nan"))
    r = CliRunner().invoke(main, ["demo", str(deck)])
    assert r.exit_code == 2 and "budget_s" in r.output and "Traceback" not in r.output


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


SIZED_DECK = """
title = "sized"
[defaults]
budget_s = 0.05
warmup = 1
[[steps]]
title = "NumPy"
scenario = "sized"
caption = "baseline on {size}"
[[steps]]
title = "torch"
scenario = "sized"
backend = "torch"
caption = "torch on {threads}"
"""
SIZED_SCENARIO = """name = "sized"
title = "sized matmul"
workload = "matmul"
[params]
n = 96
[presets.quick]
n = 24
"""


async def test_a_quick_rehearsal_replays_its_own_figures(tmp_path):
    """`--rehearse --preset quick`, then `--replay` without --preset: the quick figures show."""
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.reports.decks import load_deck
    from gpuplay.tui.presenter import PresenterApp

    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "sized.toml").write_text(SIZED_SCENARIO)
    deck = tmp_path / "talk.toml"
    deck.write_text(SIZED_DECK)
    out = tmp_path / "rec.json"
    args = [
        "demo",
        str(deck),
        "--scenarios",
        str(folder),
        "--preset",
        "quick",
        "--rehearse",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rec = load_recording(out)
    assert rec.preset == "quick" and not rec.missing
    assert [dict(s.params_items)["n"] for s in rec.step_specs] == [24, 24]

    # The deck as written names n = 96; the recording's steps say what was measured.
    plain = load_deck(deck, load_scenarios([folder]))
    assert dict(plain.steps[0].spec.params_items)["n"] == 96
    app = PresenterApp(plain, replay=rec, remember=False)
    async with app.run_test(size=(100, 30)) as pilot:
        for i in range(2):
            fig = app.figure(i)
            assert fig is not None and fig.source == "recorded" and fig.median, fig
            assert "no recorded figure" not in fig.detail
        await pilot.press("pagedown")
        assert app.query_one("#speedup").value not in ("-", "")


def test_replay_without_preset_uses_the_recordings_and_old_recordings_say_what_is_missing(
    tmp_path, monkeypatch, as_if_terminal
):
    """The CLI loads the deck at the rehearsal's preset; an older file still loads, with a warning."""
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "sized.toml").write_text(SIZED_SCENARIO)
    deck = tmp_path / "talk.toml"
    deck.write_text(SIZED_DECK)
    seen = {}

    class Recorder:
        def __init__(self, deck, **kw):
            seen["deck"] = deck
            seen.update(kw)

        def run(self):
            seen["ran"] = True

    import gpuplay.tui.presenter as presenter

    rec_path = tmp_path / "rec.json"
    doc = {
        "format": "gpuplay-deck-recording/1",
        "recorded": {"device": "Old Box", "date": "2025-01-01"},
        "preset": "quick",
        "results": [],
    }
    rec_path.write_text(json.dumps(doc))
    monkeypatch.setattr(presenter, "PresenterApp", Recorder)
    args = ["demo", str(deck), "--scenarios", str(folder), "--replay", str(rec_path)]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert dict(seen["deck"].steps[0].spec.params_items)["n"] == 24  # the rehearsal's preset
    assert "without its steps' parameters" in " ".join(r.output.split())
    del doc["preset"]
    rec_path.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert dict(seen["deck"].steps[0].spec.params_items)["n"] == 96  # no preset: the deck's own
    assert "without its preset" in " ".join(r.output.split())


def test_resume_starts_at_the_saved_step(tmp_path, monkeypatch, as_if_terminal):
    import gpuplay.tui.presenter as presenter
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.reports.decks import load_deck, save_position

    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "sized.toml").write_text(SIZED_SCENARIO)
    deck = tmp_path / "talk.toml"
    deck.write_text(SIZED_DECK)
    save_position(load_deck(deck, load_scenarios([folder])), 1)
    starts = []

    class Recorder:
        def __init__(self, deck, **kw):
            starts.append(kw["start_step"])

        def run(self):
            pass

    monkeypatch.setattr(presenter, "PresenterApp", Recorder)
    for flags in ([], ["--resume"]):
        r = CliRunner().invoke(main, ["demo", str(deck), "--scenarios", str(folder), *flags])
        assert r.exit_code == 0, r.output
    assert starts == [0, 1]


def test_a_piped_rehearsal_keeps_its_lines_whole(tmp_path):
    """Piped with COLUMNS unset, the summary is not hard-wrapped at 80 columns (the shared consoles)."""
    import os
    import subprocess
    import sys

    name = "a-scenario-whose-name-is-long-enough-to-pass-eighty-columns"
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "long.toml").write_text(
        f'name = "{name}"\ntitle = "t"\nworkload = "matmul"\n[params]\nn = 32\n'
    )
    deck = tmp_path / "talk.toml"
    deck.write_text(TINY.replace('scenario = "matmul"\nparams = { n = 64 }', f'scenario = "{name}"', 1))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    args = ["demo", str(deck), "--scenarios", str(folder), "--rehearse", "--out", str(tmp_path / "r.json")]
    proc = subprocess.run(
        [sys.executable, "-m", "gpuplay", *args],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("numpy cpu")]
    # the row whole on its line: dtype, median and speedup (at 80 columns it wrapped inside cells)
    assert rows and all("float32" in r and "1×" in r and ("µs" in r or "ms" in r) for r in rows), proc.stdout
    # the configuration column is as wide as it needs (at 80 columns the name folded every 15 cells)
    assert name[:50] in proc.stdout, proc.stdout


async def test_sweep_steps_are_said_not_recorded_and_replay_says_so(tmp_path):
    """gpu-pays-off: steps 2–4 are sweeps. The rehearsal says it records none of them, and why;
    replayed, a sweep step says it is not replayed, with no single configuration's label."""
    import io

    from rich.console import Console

    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.reports.decks import load_deck, resolve_deck_path
    from gpuplay.tui.presenter import PresenterApp

    out = tmp_path / "rg.json"
    r = CliRunner().invoke(
        main, ["demo", "gpu-pays-off", "--rehearse", "--preset", "quick", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert "steps 2, 3, 4 of 4: sweep steps, not recorded (a recording holds single figures" in r.stderr
    rec = load_recording(out)
    deck = load_deck(resolve_deck_path("gpu-pays-off"), load_scenarios(), rec.preset)
    app = PresenterApp(deck, replay=rec, remember=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("pagedown")
        await pilot.pause()
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(app.screen._compositor.render_update(full=True))
        shown = console.export_text(styles=False)
        assert "a sweep step: recorded sweeps are not replayed; run it live" in shown
        assert "numpy cpu" not in shown and "0/? points" not in shown, shown
        fig = app.figure(1)
        assert fig is not None and fig.median is None and fig.result is None and fig.source == "unavailable"


def test_help_names_every_shipped_deck():
    # A deck added to scenarios/decks but missing from --help is one a user never learns about.
    from gpuplay.core.reports.decks import builtin_decks_dir

    text = " ".join(CliRunner().invoke(main, ["demo", "--help"]).output.split())
    for path in builtin_decks_dir().glob("*.toml"):
        assert path.stem in text, path.stem
