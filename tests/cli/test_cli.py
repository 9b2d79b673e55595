"""The headless CLI on real NumPy and PyTorch: outputs, formats and bad arguments."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from gpuplay.cli import main


@pytest.fixture
def cli():
    return CliRunner()


def test_info_json_names_backends_and_why_unavailable(cli):
    res = cli.invoke(main, ["info", "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    by_name = {b["name"]: b for b in data["backends"]}
    assert by_name["numpy"]["available"]
    assert by_name["torch"]["available"]
    assert "CPU-only build" in by_name["torch"]["cuda"] or by_name["torch"]["cuda"] == "available"
    if not by_name["cupy"]["available"]:
        assert by_name["cupy"]["reason"]
    assert data["nvml"]["status"] == "ok" or "NVML unavailable" in data["nvml"]["status"]


def test_info_table(cli):
    res = cli.invoke(main, ["info"])
    assert res.exit_code == 0 and "NumPy" in res.output and "NVML" in res.output


def test_list_shows_every_scenario(cli):
    res = cli.invoke(main, ["list", "--format", "json"])
    assert res.exit_code == 0
    names = {s["name"] for s in json.loads(res.stdout)}
    assert {"matmul", "fft2d", "heat", "autograd", "lstsq", "solve"} <= names


def test_run_json(cli):
    res = cli.invoke(
        main,
        ["run", "matmul", "-s", "n=64", "--repeat", "5", "--format", "json", "-b", "torch", "--baseline"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [r["spec"]["backend"] for r in doc["results"]] == ["numpy", "torch"]
    torch_row = doc["results"][1]
    assert torch_row["summary"]["n"] == 5 and torch_row["check_ok"] is True
    assert torch_row["speedup_vs_numpy_cpu"] > 0
    assert torch_row["conditions"]["threads"]["torch_intraop"] >= 1
    assert "duration_s" in torch_row["telemetry"]  # telemetry of the timed phase, in the JSON


def test_run_csv_and_table(cli):
    res = cli.invoke(main, ["run", "fft1d", "-s", "n=1024", "--repeat", "3", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.exit_code == 0 and rows[0]["workload"] == "fft1d" and float(rows[0]["median_s"]) > 0
    res = cli.invoke(main, ["run", "fft1d", "-s", "n=1024", "--repeat", "3"])
    assert res.exit_code == 0 and "numpy cpu" in res.output


def test_run_writes_out_file_and_session_log(cli, tmp_path):
    out = tmp_path / "r.json"
    res = cli.invoke(
        main,
        [
            "run",
            "heat",
            "-s",
            "n=16",
            "-s",
            "steps=2",
            "--repeat",
            "2",
            "--format",
            "json",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0
    assert json.loads(out.read_text())["results"][0]["workload"] == "heat"
    hist = cli.invoke(main, ["history", "--format", "csv"])
    assert hist.exit_code == 0 and "heat" in hist.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "nosuch"], "unknown scenario 'nosuch'"),
        (["run", "matmul", "-s", "n=abc"], "n must be an integer"),
        (["run", "matmul", "-s", "n"], "expected NAME=VALUE"),
        (["run", "matmul", "--dtype", "int8"], "Invalid value for '--dtype'"),
        (["run", "matmul", "--device", "tpu"], "device must be"),
        (["run", "matmul", "--preset", "huge"], "no preset 'huge'"),
        (["run", "matmul", "--repeat", "0"], "Invalid value for '--repeat'"),
        (["compare", "--backends", "jax"], "unknown backend(s) jax"),
        (["compare", "--variants", "turbo"], "unknown variant(s) turbo"),
        (["monitor", "--interval", "0"], "Invalid value for '--interval'"),
    ],
)
def test_bad_arguments_give_a_message_and_exit_2(cli, args, message):
    res = cli.invoke(main, args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_refused_run_exits_1_with_reason(cli):
    res = cli.invoke(main, ["run", "fft2d", "-b", "torch", "--dtype", "bfloat16", "-s", "n=32"])
    assert res.exit_code == 1 and "bfloat16" in res.output


def test_refused_run_refuses_before_measuring_its_baseline(cli, tmp_path):
    """No device cuda:99 anywhere: refused at once, no NumPy baseline measured, titled with its size."""

    out = tmp_path / "r.md"
    t0 = time.monotonic()
    args = ["run", "fft2d", "-b", "torch", "-d", "cuda:99", "--preset", "published", "--baseline"]
    res = cli.invoke(main, [*args, "--out", str(out)])
    assert res.exit_code == 1 and "refused: torch cuda:99" in res.output
    assert time.monotonic() - t0 < 10  # the 4096² NumPy baseline alone takes longer on 2 cores
    text = out.read_text()
    assert text.startswith("### 2D FFT (4096×4096)") and "numpy cpu" not in text
    res = cli.invoke(main, [*args, "--format", "json"])
    assert [r["status"] for r in json.loads(res.stdout)["results"]] == ["refused"]


def test_compare_markdown_has_baseline_and_speedups(cli):
    res = cli.invoke(
        main,
        [
            "compare",
            "--preset",
            "quick",
            "--scenario",
            "matmul",
            "--scenario",
            "reductions",
            "--backends",
            "numpy,torch",
            "--budget",
            "0.05",
            "--format",
            "markdown",
        ],
    )
    assert res.exit_code == 0, res.output
    md = res.stdout
    assert "| matmul | 1024×1024 | numpy cpu float32 |" in md
    assert "| reductions |" in md and "torch cpu float32" in md
    assert md.count("| 1× |") == 2  # each baseline against itself


def test_compare_json_lists_refusals(cli):
    res = cli.invoke(
        main,
        [
            "compare",
            "--scenario",
            "matmul",
            "--backends",
            "numpy,cupy",
            "--budget",
            "0.05",
            "--format",
            "json",
            "-p",
            "quick",
        ],
    )
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert doc["preset"] == "quick"
    assert any(r["label"].startswith("cupy") for r in doc["refused"])


def test_monitor_streams_json_lines(cli):
    res = cli.invoke(main, ["monitor", "--count", "2", "--interval", "0.05"])
    assert res.exit_code == 0
    lines = [json.loads(x) for x in res.stdout.strip().splitlines()]
    assert len(lines) == 2
    assert lines[0]["host"]["mem_total"] > 0 and isinstance(lines[0]["host"]["cpu_percent"], list)


def test_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "gpuplay", "--version"], capture_output=True, text=True, check=True
    )
    assert "gpuplay" in out.stdout


def test_list_piped_folds_claims_within_a_natural_width():
    """Piped, there is no terminal width to honour: the table is as wide as it needs up to
    PIPED_TABLE_WIDTH (not 80, not the 800 columns of its longest claims), claims fold whole."""
    from gpuplay.cli.output import PIPED_TABLE_WIDTH
    from gpuplay.core.catalogue.scenarios import load_scenarios

    res = CliRunner(env={"COLUMNS": None}).invoke(main, ["list"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert 80 < max(len(x.rstrip()) for x in lines) <= PIPED_TABLE_WIDTH
    words = res.stdout.split()
    claims = [s.claim.text for s in load_scenarios([]).scenarios.values() if s.claim]
    assert len(claims) >= 10
    for claim in claims:  # folded, never cut: every word of every claim is there
        assert all(w in words for w in claim.split()), claim
    assert "…" not in res.stdout


def test_run_piped_keeps_its_conditions_line_whole():
    res = CliRunner(env={"COLUMNS": None}).invoke(main, ["run", "fft1d", "-s", "n=1024", "--repeat", "3"])
    assert res.exit_code == 0, res.output
    conditions = [x for x in res.stdout.splitlines() if "medians after warm-up" in x]
    assert len(conditions) == 1 and conditions[0].rstrip().endswith("error vs float64 NumPy")
    assert "numpy cpu" in res.stdout


def test_piped_warnings_on_stderr_are_not_wrapped():
    from gpuplay.cli.output import stderr_console

    long = "warning: " + " ".join(f"word{i}" for i in range(40))
    res = CliRunner(env={"COLUMNS": None}).invoke(_printer(lambda: stderr_console().print(long)), [])
    assert long in res.stderr.splitlines()


def _printer(fn):
    import click

    @click.command()
    def cmd():
        fn()

    return cmd


def test_run_markdown(cli):
    res = cli.invoke(
        main,
        [
            "run",
            "fft1d",
            "-s",
            "n=1024",
            "--repeat",
            "3",
            "-b",
            "torch",
            "--baseline",
            "--format",
            "markdown",
        ],
    )
    assert res.exit_code == 0, res.output
    table = [x for x in res.stdout.splitlines() if x.startswith("|")]
    assert "speedup" in table[0] and len(table) >= 4, res.stdout


def test_scenarios_folder_given_before_the_command_reaches_it(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "tiny.toml").write_text('name = "tiny"\ntitle = "Tiny"\nworkload = "matmul"\n[params]\nn = 8\n')
    for args in (["--scenarios", str(folder), "list"], ["list", "--scenarios", str(folder)]):
        res = CliRunner().invoke(main, [*args, "--format", "json"])
        assert res.exit_code == 0, res.output
        assert "tiny" in {s["name"] for s in json.loads(res.stdout)}, args


def test_preset_default_is_a_scenarios_own_parameters_on_the_command_line_as_in_the_playground():
    res = CliRunner().invoke(main, ["run", "batched_matmul", "-p", "default", "--format", "json", "--budget",
                                    "0.01", "--warmup", "0", "-s", "n=8"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert '"batch": 256' in res.stdout  # the scenario's [params], not quick's batch=64
    bad = CliRunner().invoke(main, ["run", "matmul", "-p", "huge"])
    assert bad.exit_code == 2 and "(has: quick, published, or default for its own parameters)" in bad.output


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


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["run", "matmul"],
        ["sweep", "matmul", "--over", "n=8,16"],
        ["compare"],
        ["demo", "intro"],
        [],
    ],
    ids=lambda c: c[0] if c else "playground",
)
@pytest.mark.parametrize("what", ["missing", "a_file"])
def test_a_scenario_folder_that_is_not_there_is_bad_input_on_every_command(
    monkeypatch, tmp_path, command, what
):
    """`gpuplay list --scenarios /missing` warned and exited 0 (run measured on); now exit 2 with
    the message on every command that takes --scenarios, nothing measured or started."""
    from gpuplay.core import engine
    from gpuplay.core.studies import compare

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    monkeypatch.setattr(engine, "measure", measured)
    monkeypatch.setattr(compare, "run_compare", measured)
    folder = tmp_path / "missing"
    if what == "a_file":
        folder.write_text("x")
    res = CliRunner().invoke(main, [*command, "--scenarios", str(folder)])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    why = "does not exist" if what == "missing" else "is not a folder"
    assert f"Invalid value for '--scenarios': {folder} {why}: name a folder of scenario .toml files" in said
