"""The CLI as a new user types it: typos answered with what was meant, --out that picks its format
from its suffix and refuses a folder that is not there, what compare skipped in its output, a
scenario file that failed to load named when its scenario is asked for. Usage errors exit 2 and
never print a traceback."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

FAST = ["-s", "n=1000", "--budget", "0.02"]


@pytest.fixture
def cli():
    return CliRunner()


def _said(res) -> str:
    return (res.stdout + (res.stderr or "")).replace("\n", " ")


def _usage_error(res, *words: str) -> None:
    said = _said(res)
    assert res.exit_code == 2, said
    assert "Traceback" not in said
    for w in words:
        assert w in said, said


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "matmull"], ["unknown scenario 'matmull'; did you mean 'matmul'?"]),
        (["sweep", "matmull", "--over", "n=8,16"], ["did you mean 'matmul'?"]),
        (["compare", "matmull"], ["'matmull' is not a scenario; did you mean 'matmul'?"]),
        (["run", "matmul", "-p", "quik"], ["has no preset 'quik'; did you mean 'quick'?"]),
        (["run", "matmul", "--json"], ["No such option --json: for json output use --format json"]),
        (["compare", "--csv"], ["No such option --csv: for csv output use --format csv"]),
        (["info", "--csv"], ["No such option --csv: --format takes table, json"]),
        (["run", "--code", "mine.py"], ["to time a code file name it: gpuplay run mine.py"]),
        (["run", "matmul", "--budgte", "1"], ["No such option --budgte: did you mean --budget?"]),
    ],
)
def test_a_typo_is_answered_with_what_was_meant(cli, args, words):
    _usage_error(cli.invoke(main, args), *words)


def test_a_scenario_file_that_did_not_load_is_named_with_every_mistake(cli, tmp_path):
    folder = tmp_path / "sc"
    folder.mkdir()
    (folder / "mymm.toml").write_text('name = "my mm"\nworkload = "matmull"\ntags = 3\n')
    res = cli.invoke(main, ["run", "mymm", "--scenarios", str(folder)])
    _usage_error(res, "unknown scenario 'mymm':", "mymm.toml defines it but did not load")
    said = _said(res)
    for mistake in ("name: use letters", "workload: unknown workload 'matmull'", "tags: must be a list"):
        assert said.count(mistake) >= 2, said  # in the warning and again in the error


def test_out_into_a_missing_folder_is_refused_before_measuring(cli, tmp_path):
    target = tmp_path / "no-such-folder" / "x.json"
    res = cli.invoke(main, ["run", "elementwise", *FAST, "--out", str(target)])
    _usage_error(res, "no folder", "no-such-folder; create it first (mkdir -p")
    assert not target.parent.exists()


@pytest.mark.parametrize(
    ("name", "starts"),
    [("r.json", "{"), ("r.csv", "scenario,workload"), ("r.md", "### "), ("r.markdown", "### ")],
)
def test_the_out_suffix_picks_the_format(cli, tmp_path, name, starts):
    target = tmp_path / name
    res = cli.invoke(main, ["run", "elementwise", *FAST, "--out", str(target)])
    assert res.exit_code == 0, _said(res)
    assert target.read_text().startswith(starts)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "elementwise", *FAST, "--format", "csv", "--out", "{}/r.json"],
        ["run", "elementwise", *FAST, "--format", "table", "--out", "{}/r.json"],
        ["compare", "--scenario", "elementwise", "--format", "json", "--out", "{}/r.md"],
        ["sweep", "elementwise", "--over", "n=8,16", "--format", "markdown", "--out", "{}/r.csv"],
        ["demo", "numpy-to-gpu", "--rehearse", "--out", "{}/talk.md"],
        ["collectives", "--nproc", "1", "--format", "csv", "--out", "{}/r.json"],
    ],
)
def test_a_format_against_the_out_suffix_is_a_usage_error(cli, tmp_path, args):
    args = [a.format(tmp_path) for a in args]
    res = cli.invoke(main, args)
    _usage_error(res, "--out")
    assert not any(tmp_path.glob("r.*")) and not any(tmp_path.glob("talk.*"))


def test_a_format_that_agrees_with_the_suffix_and_an_unknown_suffix_are_taken(cli, tmp_path):
    res = cli.invoke(
        main, ["run", "elementwise", *FAST, "--format", "json", "--out", str(tmp_path / "r.json")]
    )
    assert res.exit_code == 0 and json.loads((tmp_path / "r.json").read_text())["results"]
    res = cli.invoke(main, ["run", "elementwise", *FAST, "--format", "csv", "--out", str(tmp_path / "r.txt")])
    assert res.exit_code == 0 and (tmp_path / "r.txt").read_text().startswith("scenario,")


def test_compare_puts_what_it_skipped_in_its_table_and_its_files(cli, tmp_path):
    base = ["compare", "--scenario", "elementwise", "--backends", "numpy,cupy", "--budget", "0.02"]
    res = cli.invoke(main, base)
    assert res.exit_code == 0, _said(res)
    assert "skipped: cupy" in res.stdout and "(elementwise): CuPy" in res.stdout
    md, csv_file, js = tmp_path / "c.md", tmp_path / "c.csv", tmp_path / "c.json"
    for target in (md, csv_file, js):
        assert cli.invoke(main, [*base, "--out", str(target)]).exit_code == 0
    assert "Skipped here (not run):" in md.read_text() and "- cupy" in md.read_text()
    rows = csv_file.read_text().splitlines()
    assert any(r.startswith("elementwise,elementwise,,cupy") and ",skipped," in r for r in rows), rows
    refused = json.loads(js.read_text())["refused"]
    assert refused and refused[0]["label"].startswith("cupy") and "CuPy" in refused[0]["reason"]


def test_replay_of_a_character_device_says_device_not_fifo(cli):
    res = cli.invoke(main, ["demo", "numpy-to-gpu", "--replay", "/dev/null"])
    _usage_error(res, "/dev/null", "not a regular file (a device, such as /dev/null)")
    assert "FIFO" not in _said(res)


def test_one_operator_call_is_said_in_the_singular(cli, tmp_path):
    pytest.importorskip("torch")
    code = tmp_path / "one.py"
    code.write_text('PARAMS = {"n": 8}\ndef inputs(rng, n=8):\n    return (rng.random(n),)\n'
                    "def step(xp, a):\n    return a + 1\n")  # fmt: skip
    res = cli.invoke(main, ["run", str(code), "-b", "torch", "--profile", "--budget", "0.02"])
    assert res.exit_code == 0, _said(res)
    assert "· 1 operator call (" in res.stdout and "1 operator calls" not in res.stdout
