"""R9 (docs/hardening.md): four defects a new user's test drive left, each pinned through the command
a user types: calibrate's budget, an unwritable --out, a missing --scenarios folder."""

from __future__ import annotations

import re
import sys
import time

import pytest
from click.testing import CliRunner

from gpuplay.cli import main


@pytest.fixture
def numpy_only(monkeypatch):
    """A machine without torch: `import torch` fails and no torch distribution is installed."""
    from gpuplay.core.measure import roofline

    real = roofline.package_version
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(roofline, "package_version", lambda name: None if name == "torch" else real(name))


def test_calibrate_budget_bounds_the_whole_wait(numpy_only):
    """`calibrate --budget 2` took 51.9 s for 12 probes: the matmuls grew for up to 4x the budget
    each, and a last size could cost far more. The budget is now the whole calibration's; a
    generous bound (twice it, plus start-up), not a speed test."""
    budget = 1.0
    t0 = time.perf_counter()
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", str(budget), "--format", "json"])
    took = time.perf_counter() - t0
    assert res.exit_code in (0, 1), res.output  # 1: no peak reached in so short a budget (said)
    assert "[5 of 5 probes]" in res.stderr  # NumPy: copy, triad, three matmul dtypes
    assert took <= 2 * budget + 1.5, f"{took:.1f} s for a budget of {budget} s"
    said = re.search(r"calibration took ([\d.]+) s against a budget of 1 s: ([\d.]+) s measuring 5 probes",
                     " ".join(res.stderr.split()))  # fmt: skip
    assert said is not None, res.stderr
    assert float(said.group(2)) <= float(said.group(1)) <= took + 0.05


def test_a_budget_too_small_for_the_least_a_probe_needs_is_said(numpy_only):
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "0.01", "--format", "json"])
    assert res.exit_code == 1, res.output  # no peak can be reached in 0.01 s: nothing stored, said
    said = " ".join(res.stderr.split())
    assert "against a budget of 0.01 s" in said
    assert "the least each probe needs (its smallest size, timed twice) took longer than this budget" in said


def test_a_matmul_probe_stops_growing_before_a_size_that_would_overrun_its_budget():
    """A probe whose rate still rises with size (each call 4x the last, as a GPU filling up does)
    grew until a call took long enough: to n=1024 here, ~2 s for a 0.3 s share. It now stops
    before the size whose three calls would not fit in what is left."""
    from gpuplay.core.measure import roofline

    def make(n):
        def once():
            time.sleep(0.002 * (n / 64) ** 2)
            return 0.002 * (n / 64) ** 2

        return once

    t0 = time.perf_counter()
    got = roofline._matmul_peak(make, 64, 4096, 1.0, 0.3)
    took = time.perf_counter() - t0
    assert took <= 0.3 + 0.25, took
    # Stopped while its rate still rose: no peak, and said so (never stored as a roof).
    assert isinstance(got, str) and "still rising at n=" in got and int(got.split("n=")[1].split()[0]) <= 256


OUT_COMMANDS = [
    ["run", "matmul", "-b", "numpy"],
    ["sweep", "matmul", "--over", "n=8,16", "--backends", "numpy"],
    ["compare", "--scenario", "matmul", "--backends", "numpy"],
    ["demo", "intro", "--rehearse"],
    ["collectives", "--backend", "gloo"],
]


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_an_unwritable_out_is_refused_before_anything_is_measured(monkeypatch, tmp_path, command, where):
    """`--out` that could not be written was found after measuring: a "creating folder" note, then
    the error, and the measurement lost. Now exit 2 at once, naming why, nothing measured."""
    from gpuplay.core import engine
    from gpuplay.core.reports import devices_compare
    from gpuplay.core.studies import compare

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    for module, name in ((engine, "measure"), (compare, "run_compare"), (devices_compare, "run_devices")):
        monkeypatch.setattr(module, name, measured)
    (tmp_path / "results.json").write_text("{}")
    out = (
        tmp_path / "results.json" / "run" / "r.json"
        if where == "under_a_file"
        else "/proc/gpuplay-out/r.json"
    )
    res = CliRunner().invoke(main, [*command, "--out", str(out)])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert f"Invalid value for '--out': cannot write {out}: " in said, said
    why = (
        f"{tmp_path / 'results.json'} is a file, not a folder"
        if where == "under_a_file"
        else "no file can be made in /proc"
    )
    assert why in said and "creating folder" not in said
    assert not list(tmp_path.glob("**/.gpuplay-write-check-*"))  # the check's file is removed


def test_a_write_that_fails_after_measuring_prints_the_results_instead(monkeypatch, tmp_path):
    """A full disk (or the folder removed meanwhile) after the check: the results go to stdout and
    the error says where writing failed; they were lost."""
    import errno

    from gpuplay.core.storage import atomicfile

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomicfile, "write_atomic", full)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["run", "matmul", "-b", "numpy", "-s", "n=16", "--repeat", "2", "--warmup", "0",
                                    "--format", "json", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1, res.output
    assert '"workload": "matmul"' in res.stdout  # the measurement, on stdout
    said = " ".join(res.stderr.split())
    assert (
        f"cannot write {out}: No space left on device; what was measured is printed to stdout instead" in said
    )


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
