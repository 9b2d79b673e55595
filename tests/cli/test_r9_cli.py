"""R9 (docs/hardening.md): what a new user tripped over on the command line, each pinned through the
command a user types."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuplay.cli import main


def test_compare_devices_stopped_by_ctrl_c_exits_130_as_every_command_does(monkeypatch):
    from gpuplay.core.reports import devices_compare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(devices_compare, "run_devices", interrupted)
    res = CliRunner().invoke(main, ["compare", "matmul", "--backends", "numpy", "--devices", "cpu"])
    assert res.exit_code == 130, res.output  # was 1, an error, against cli/exitcodes.py
    assert "interrupted by SIGINT" in res.stderr


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


def test_preset_default_is_a_scenarios_own_parameters_on_the_command_line_as_in_the_playground():
    res = CliRunner().invoke(main, ["run", "batched_matmul", "-p", "default", "--format", "json", "--budget",
                                    "0.01", "--warmup", "0", "-s", "n=8"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert '"batch": 256' in res.stdout  # the scenario's [params], not quick's batch=64
    bad = CliRunner().invoke(main, ["run", "matmul", "-p", "huge"])
    assert bad.exit_code == 2 and "(has: quick, published, or default for its own parameters)" in bad.output


def test_an_output_path_under_a_file_says_so_not_file_exists(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    out = tmp_path / "results.json" / "run" / "r.json"
    res = CliRunner().invoke(main, ["run", "matmul", "-s", "n=16", "--repeat", "2", "--warmup", "0", "--out",
                                    str(out)])  # fmt: skip
    assert res.exit_code == 2, res.output  # before measuring now (tests/cli/test_r9_testdrive.py)
    said = " ".join(res.output.split())
    assert f"cannot write {out}: {tmp_path / 'results.json'} is a file, not a folder" in said, said
    assert "File exists" not in said and "Not a directory" not in said


@pytest.mark.parametrize(
    ("devices", "said"),
    [("", "no device given"), (" , ", "no device given"), ("cuda:x", "'cuda:x' is not a device")],
)
def test_a_devices_value_written_wrongly_is_a_usage_error_and_measures_nothing(monkeypatch, devices, said):
    """`--devices ''` ran every scenario on every device (41 runs here); `cuda:x` exited 1 as a
    device missing here does (`cuda:7` still does: it is written right)."""
    from gpuplay.core.reports import devices_compare
    from gpuplay.core.studies import compare

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    monkeypatch.setattr(compare, "run_compare", measured)
    monkeypatch.setattr(devices_compare, "run_devices", measured)
    res = CliRunner().invoke(main, ["compare", "--backends", "numpy", "--devices", devices])
    assert res.exit_code == 2, res.output
    assert said in res.output and "Invalid value for --devices" in res.output


@pytest.mark.parametrize(
    "command",
    [["run", "matmul"], ["sweep", "matmul", "--over", "n=8,16"], ["compare", "--scenario", "matmul"],
     ["demo", "numpy-to-gpu", "--rehearse"]],
)  # fmt: skip
def test_an_empty_out_path_is_refused_before_anything_runs(monkeypatch, command):
    """`--out "$UNSET"` printed to stdout and exited 0, as if no --out had been given."""
    from gpuplay.core import engine

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    monkeypatch.setattr(engine, "measure", measured)
    res = CliRunner().invoke(main, [*command, "--out", ""])
    assert res.exit_code == 2, res.output
    assert "Invalid value for '--out': an empty path" in res.output


@pytest.mark.parametrize(
    "command",
    [["run", "matmul"], ["sweep", "matmul", "--over", "n=8,16"], ["compare", "--scenario", "matmul"]],
)
def test_an_empty_preset_is_refused_not_taken_as_the_scenarios_own_parameters(command):
    """`-p ""` ran the scenario's own parameters, unsaid (matmul at 2048² where quick is 1024²)."""
    res = CliRunner().invoke(
        main, [*command, "-p", "", "--backends" if command[0] != "run" else "-b", "numpy"]
    )
    assert res.exit_code == 2, res.output
    assert "an empty preset; name one (quick, published, default) or leave it out" in res.output


def test_compare_of_the_data_pipeline_exits_0_its_numpy_row_refused_by_the_planner_is_not_measured(tmp_path):
    """The planner refuses NumPy for the data pipeline (it is torch's DataLoader), yet the torch
    row's NumPy baseline was scheduled and measured, came back refused, and every `gpuplay compare`
    (the README's command) exited 1 on every machine."""
    import json

    from tests.tui_helpers import tiny_scenarios

    folder = tiny_scenarios(tmp_path / "sc")
    res = CliRunner().invoke(main, ["compare", "--scenarios", str(folder), "--scenario", "dataloader",
                                    "--backends", "numpy,torch", "--budget", "0.02", "--format", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "skipped numpy cpu float32 (dataloader): the data pipeline is torch's DataLoader" in res.stderr
    results = json.loads(res.stdout)["results"]
    assert [(r["spec"]["backend"], r["status"]) for r in results] == [("torch", "ok")]
