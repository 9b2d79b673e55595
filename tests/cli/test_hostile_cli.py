"""Hostile flags and files through the real commands: a usage error (exit 2) naming the problem,
or the bad file named and skipped; never a traceback, never an escape byte from a file on screen."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

ESC = "\x1b"
MARKUP_TITLE = '"[/]\\u001b[31mRED [bold\\u001b]0;pwned\\u0007"'


@pytest.fixture
def cli():
    return CliRunner()


def _out(res) -> str:
    return res.stdout + (res.stderr or "")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "elementwise", "--budget", "nan"],
        ["run", "elementwise", "--budget", "inf"],
        ["run", "elementwise", "--budget", "1e-300"],
        ["run", "elementwise", "--max-step", "nan"],
        ["run", "elementwise", "--max-step", "-inf"],
        ["run", "elementwise", "--warmup", "1000000000"],
        ["run", "elementwise", "--repeat", "1000000000"],
        ["run", "elementwise", "--seed", "-1"],
        ["run", "elementwise", "--threads", "1000000"],
        ["compare", "--budget", "nan"],
        ["compare", "--max-step", "inf"],
        ["compare", "--threads", "1000000"],
        ["monitor", "--interval", "nan", "--count", "1"],
        ["monitor", "--interval", "inf", "--count", "1"],
        ["monitor", "--interval", "1e-300", "--count", "1"],
        ["calibrate", "--budget", "nan"],
        ["info", "--probe-timeout", "inf"],
    ],
    ids=" ".join,
)
def test_non_finite_or_unbounded_numbers_are_usage_errors(cli, args):
    res = cli.invoke(main, args)
    assert res.exit_code == 2, _out(res)
    assert "Traceback" not in _out(res)
    assert f"'{args[2]}'" in _out(res) or args[2] in _out(res)


def test_threads_are_bounded_by_the_cores_in_words(cli):
    res = cli.invoke(main, ["run", "elementwise", "--threads", "1000000"])
    assert res.exit_code == 2
    assert f"this machine has {os.cpu_count()} logical cores" in _out(res)


def _markup_folder(tmp_path):
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "markup.toml").write_text(
        f'name = "markup"\nworkload = "elementwise"\ntitle = {MARKUP_TITLE}\n'
        'description = "[bold"\n[params]\nn = 1000\n[claim]\nsource = "[/]"\ntext = "claim [/] \\u001b[2J"\n'
    )
    (folder / "badfield.toml").write_text('"[/]\\u001b[2J" = 1\nname = "x"\nworkload = "matmul"\n')
    return folder


def test_list_shows_markup_and_escapes_as_text(cli, tmp_path):
    res = cli.invoke(main, ["list", "--scenarios", str(_markup_folder(tmp_path))])
    out = _out(res)
    assert res.exit_code == 0, out
    assert "Traceback" not in out and ESC not in out
    assert "[/]␛[31mRED [bold" in out  # the title, as written, controls visible
    assert "badfield.toml" in out.replace("\n", "")  # the bad file named; the rest listed
    assert "matmul" in out


def test_run_with_a_markup_title_measures_and_prints_it_as_text(cli, tmp_path):
    folder = _markup_folder(tmp_path)
    res = cli.invoke(main, ["run", "markup", "--scenarios", str(folder), "--budget", "0.05"])
    out = _out(res)
    assert res.exit_code == 0, out
    assert "Traceback" not in out and ESC not in out
    assert "[/]␛[31mRED" in out


def test_history_names_bad_logs_and_shows_the_good_ones(cli, tmp_path):
    res = cli.invoke(main, ["run", "elementwise", "-s", "n=1000", "--budget", "0.02"])
    assert res.exit_code == 0, _out(res)
    sessions = tmp_path / "state" / "sessions"
    (sessions / "session-20200101-000000-1.jsonl").write_bytes(b"\xff\xfe\n")
    (sessions / "session-20200101-000001-2.jsonl").write_text("[1]\n")
    (sessions / "session-20200101-000002-3.jsonl").mkdir()
    os.mkfifo(sessions / "session-20200101-000003-4.jsonl")
    res = cli.invoke(main, ["history", "--format", "json"])
    out = _out(res)
    assert res.exit_code == 0, out
    for n in range(4):
        assert f"session-20200101-00000{n}-{n + 1}.jsonl" in res.stderr
    assert '"elementwise"' in res.stdout


def test_out_into_a_missing_folder_is_refused_not_created(cli, tmp_path):
    target = tmp_path / "new" / "deeper" / "r.json"
    res = cli.invoke(main, ["run", "elementwise", "-s", "n=1000", "--budget", "0.02", "--format", "json",
                            "--out", str(target)])  # fmt: skip
    assert res.exit_code == 2, _out(res)
    assert not (tmp_path / "new").exists()
    assert "no folder" in res.stderr and str(target.parent) in res.stderr.replace("\n", "")


def test_a_corrupt_calibration_cache_costs_no_measurement(cli, tmp_path):
    cache = tmp_path / "state" / "roofline" / "cpu.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(
        '{"device": "cpu", "name": "x", "fingerprint": {}, "measured_at": "t", "calibration_s": 1,'
        ' "schema": 1, "measurements": [{"kind": "memory", "name": "triad", "library": "numpy",'
        ' "value": "fast", "size": "s", "best_s": 0.1, "repeats": 3}]}'
    )
    res = cli.invoke(main, ["run", "elementwise", "-s", "n=1000", "--budget", "0.02"])
    out = _out(res)
    assert res.exit_code == 0, out
    assert "Traceback" not in out
    assert out.count("calibration cache") == 1 and "re-run gpuplay calibrate" in out
    assert "elementwise" in out


def test_trace_is_written_atomically(tmp_path, monkeypatch):
    """An export that fails half-way leaves the previous trace as it was, and no temporary file."""
    import torch.profiler

    from gpuplay.core.runner.profile import profile_spec
    from gpuplay.core.spec import RunSpec

    trace = tmp_path / "trace.json"
    trace.write_text('{"previous": "trace"}')

    def broken_export(self, path):
        with open(path, "w") as f:
            f.write('{"traceEvents": [')  # half a trace, then the disk fills
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", broken_export)
    data = profile_spec(RunSpec.make("elementwise", {"n": 1000}, backend="torch"), steps=1, trace=str(trace))
    assert "No space left" in data.get("trace_error", "")
    assert trace.read_text() == '{"previous": "trace"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state", "trace.json"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["trace.json"]
