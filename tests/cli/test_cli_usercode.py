"""`gpuplay run FILE.py` and `gpuplay --code FILE.py` on real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RAISES = """
def inputs(rng, n=100):
    return rng.random(n)

def step(xp, x):
    return x[0] / undefined_name
"""


@pytest.fixture
def cli():
    return CliRunner()


def test_run_a_code_file_with_baseline_as_json(cli):
    res = cli.invoke(
        main,
        ["run", str(EXAMPLES / "softmax.py"), "-b", "torch", "--baseline", "-p", "quick", "-s", "cols=256",
         "--repeat", "3", "--warmup", "1", "--format", "json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["results"]
    assert [r["label"] for r in rows] == ["numpy cpu float32", "torch cpu float32"]
    assert all(r["status"] == "ok" and r["check_ok"] for r in rows)
    assert rows[1]["workload"] == "code:" + str((EXAMPLES / "softmax.py").resolve())
    assert rows[1]["size"] == "rows=512, cols=256"


def test_run_a_file_whose_step_raises_prints_its_frames(cli, tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(RAISES)
    res = cli.invoke(main, ["run", str(path), "--repeat", "2"])
    assert res.exit_code == 1
    flat = " ".join(res.stderr.split())
    assert "broken.py:6: step() raised NameError: name 'undefined_name' is not defined" in flat
    assert f'File "{path}", line 6, in step' in res.stderr
    assert "Traceback (most recent call last)" not in res.output + res.stderr


def test_run_a_missing_or_broken_file_is_a_usage_error(cli, tmp_path):
    res = cli.invoke(main, ["run", str(tmp_path / "gone.py")])
    assert res.exit_code == 2 and "gone.py: no such file" in res.stderr
    (tmp_path / "bad.py").write_text("def step(xp, x):\n  return (\n")
    res = cli.invoke(main, ["run", str(tmp_path / "bad.py")])
    assert res.exit_code == 2 and "bad.py:2: SyntaxError" in res.stderr


def test_a_config_code_file_runs_by_its_name(cli, tmp_path, monkeypatch):
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "config.toml").write_text(f'code_files = ["{EXAMPLES / "monte_carlo_pi.py"}"]\n')
    monkeypatch.setenv("GPUPLAY_CONFIG_DIR", str(cfg_dir))
    res = cli.invoke(main, ["run", "monte_carlo_pi", "-p", "quick", "--repeat", "2", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["results"][0]["check_ok"]


def test_code_option_passes_checked_paths_to_the_app(cli, monkeypatch, tmp_path, as_if_terminal):
    import gpuplay.tui.app as app

    calls = []

    def run_app(scenario_dirs=None, *, code_files=None, theme=None):
        calls.append(code_files)

    monkeypatch.setattr(app, "run_app", run_app)
    res = cli.invoke(main, ["--code", str(EXAMPLES / "nbody.py")])
    assert res.exit_code == 0, res.output
    assert calls == [[(EXAMPLES / "nbody.py").resolve()]]
    # A file that does not load yet opens the app (which warns, and loads it once it is fixed);
    # one that cannot be read is refused here.
    (tmp_path / "nostep.py").write_text("x = 1\n")
    res = cli.invoke(main, ["--code", str(tmp_path / "nostep.py")])
    assert res.exit_code == 0 and calls[-1] == [(tmp_path / "nostep.py").resolve()]
    res = cli.invoke(main, ["--code", str(tmp_path / "missing.py")])
    assert res.exit_code == 2 and "missing.py" in res.stderr
    assert len(calls) == 2


@pytest.mark.slow
@pytest.mark.plain_children  # an asynchronous exception under a tracer: docs/testing.md, Coverage
def test_ctrl_c_stops_a_step_that_never_returns(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "loop.py"
    path.write_text(
        "def inputs(rng, n=100):\n    return rng.random(n)\n\ndef step(xp, x):\n    while True:\n        x = x + 1\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuplay", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background job ignores it
    )
    time.sleep(4)
    assert proc.poll() is None, "the endless step should still be running"
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "interrupted by SIGINT" in err and "Traceback" not in err
    assert time.monotonic() - t0 < 5


def test_duplicate_scenario_names_are_said_naming_both_files(cli, tmp_path):
    """Two files named alike in one folder, and a user file named like a shipped scenario: the
    later wins, and `list` says so (both files named; the shipped one replaced, marked)."""
    from gpuplay.core.catalogue.scenarios import builtin_dir

    folder = tmp_path / "mine"
    folder.mkdir()
    shipped = (builtin_dir() / "matmul.toml").read_text()
    (folder / "a.toml").write_text(shipped.replace('name = "matmul"', 'name = "twin"'))
    (folder / "b.toml").write_text(shipped.replace('name = "matmul"', 'name = "twin"'))
    (folder / "mm.toml").write_text(shipped.replace('title = "Matrix multiply"', 'title = "My matmul"'))
    res = cli.invoke(main, ["list", "--scenarios", str(folder)])
    assert res.exit_code == 0, res.output
    err = " ".join(res.stderr.split())  # the terminal wraps long lines
    assert f"{folder / 'a.toml'}" in err and f"{folder / 'b.toml'}" in err and "'twin'" in err
    assert f"{folder / 'mm.toml'} replaces the shipped scenario 'matmul'" in err
    assert str(builtin_dir() / "matmul.toml") in err
    out = " ".join(res.stdout.split())
    assert "My matmul" in out and "replaces the shipped one" in out
    doc = json.loads(cli.invoke(main, ["list", "--scenarios", str(folder), "--format", "json"]).stdout)
    mm = next(s for s in doc if s["name"] == "matmul")
    assert mm["replaces"] == str(builtin_dir() / "matmul.toml")


def test_a_program_calling_main_gets_its_call_back_after_the_playground_closes(tmp_path):
    """The playground's clean close skips the interpreter's teardown with os._exit, but only in the
    `gpuplay` process itself: a test or a notebook that calls `main` must not be ended by it (a
    pytest ended so exits 0 after the tests run so far)."""
    script = tmp_path / "caller.py"
    script.write_text(
        "import gpuplay.tui.app as app\n"
        "from click.testing import CliRunner\n"
        "from gpuplay.cli import main\n"
        "import gpuplay.cli.terminal as terminal\n"
        "terminal.require_terminal = lambda what: None\n"
        "app.run_app = lambda scenario_dirs=None, *, code_files=None, theme=None: None\n"
        "res = CliRunner().invoke(main, [])\n"
        "print('exit', res.exit_code, res.exception)\n"
        "print('still here')\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "still here" in proc.stdout, (proc.stdout, proc.stderr)
    assert "exit 0 None" in proc.stdout


DOUBLE = "def inputs(rng, n=1000):\n    return rng.random(n)\ndef step(xp, x):\n    return x * 2.0\n"


def test_a_code_file_without_presets_sweeps_with_the_default_preset_and_no_made_up_fit(tmp_path):
    """`gpuplay sweep FILE.py --over n=…` on a file with PARAMS and no PRESETS: the default preset
    (quick) was demanded of it, so the sweep refused to start; and with no flops()/bytes() the fit
    of time against a work of 0 said "time did not grow with size" under times that grew."""
    f = tmp_path / "double.py"
    f.write_text('PARAMS = {"n": 1000}\n' + DOUBLE)
    res = CliRunner().invoke(main, ["sweep", str(f), "--over", "n=1000,64000", "--backends", "numpy",
                                    "--budget", "0.02", "--warmup", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "no fit (no work counted: the code file defines no flops() or bytes()" in res.stdout
    assert "did not grow" not in res.stdout
    named = CliRunner().invoke(main, ["sweep", str(f), "--over", "n=1000,2000", "-p", "quick"])
    assert named.exit_code == 2 and "no preset 'quick'" in named.output  # a preset named is still checked


def test_a_scenario_folder_with_a_scenario_without_presets_does_not_stop_compare(tmp_path):
    (tmp_path / "mine.toml").write_text(
        'name = "mine"\ntitle = "Mine"\nworkload = "elementwise"\ndescription = "no presets"\n[params]\nn = 1000\n'
    )
    res = CliRunner().invoke(main, ["compare", "--scenarios", str(tmp_path), "--scenario", "mine",
                                    "--scenario", "matmul", "--backends", "numpy", "--budget", "0.02"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "mine · 1,000" in res.stdout and "matmul · 1024×1024" in res.stdout  # its own n; matmul's quick


def test_setting_or_sweeping_a_parameter_a_code_file_does_not_declare_says_how_to_declare_it(tmp_path):
    """It said "(known: )": an empty list, for a file whose inputs(rng, size=1000) looks parameterised."""
    f = tmp_path / "double.py"
    f.write_text(DOUBLE.replace("n=1000", "size=1000").replace("rng.random(n)", "rng.random(size)"))
    res = CliRunner().invoke(main, ["sweep", str(f), "--over", "size=100..1000"])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert "(known: )" not in said
    assert "double.py declares no PARAMS, so it takes none; inputs() has size=1000, but only PARAMS" in said
    assert "add PARAMS = {'size': 1000} to double.py" in said
    g = tmp_path / "withn.py"
    g.write_text('PARAMS = {"n": 1000}\n' + DOUBLE)
    res = CliRunner().invoke(main, ["run", str(g), "-s", "m=3"])
    assert res.exit_code == 2 and "(known: n; to add m, put 'm': 1000 in withn.py's PARAMS" in " ".join(
        res.output.split()
    )
