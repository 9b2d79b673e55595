"""`gpuplay run`: the headline is the allocation mode a fresh plain loop gets; the other mode is
named beside it in the table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.runner.alloc import page_returner

needs_glibc = pytest.mark.skipif(page_returner() is None, reason="malloc_trim is glibc's")
ARGS = ["run", "elementwise", "-s", "n=1000000", "--dtype", "float64", "--budget", "0.1", "--warmup", "2"]


@pytest.fixture
def plain_loop_faults(monkeypatch):
    """The fresh-process plain loop faulted like the pages-returned mode (its child is real in
    tests/unit/test_alloc_headline.py); the modes differ."""
    from gpuplay.core.runner import measure

    monkeypatch.setattr(
        measure, "plain_loop_faults", lambda spec, steps, cancel: {"faults_per_step": 1e6, "steps": 5}
    )
    monkeypatch.setattr(measure, "modes_differ", lambda probe, faults, median: True)


@needs_glibc
def test_the_table_json_and_csv_show_the_plain_loops_mode_first_and_the_other_by_name(plain_loop_faults):
    res = CliRunner().invoke(main, [*ARGS, "--format", "json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["results"][0]
    assert r["summary"]["median"] == statistics.median(r["samples_s"])
    assert r["conditions"]["alloc"] == "cold", "the headline is the pages-returned loop"
    other = r["other_mode"]
    assert other["name"] == "pages reused" and other["headline"] == "pages returned"
    assert other["median_s"] > 0 and other["median_s"] != r["summary"]["median"]
    assert r["gbps"] == pytest.approx(r["bytes"] / r["summary"]["median"] / 1e9)

    res = CliRunner().invoke(main, [*ARGS, "--format", "csv"])
    header, row = list(csv.reader(io.StringIO(res.stdout)))[:2]
    cells = dict(zip(header, row, strict=True))
    assert (cells["headline_mode"], cells["other_mode"]) == ("pages returned", "pages reused")
    assert float(cells["other_mode_median_s"]) > 0

    res = CliRunner().invoke(main, ARGS, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert (
        " with pages reused" in res.output and "allocation mode: the figure is pages returned" in res.output
    )


@pytest.mark.slow
@pytest.mark.real_engine
@needs_glibc
def test_a_real_run_says_which_mode_a_plain_loop_got_and_heads_with_it(tmp_path):
    """Through the engine process, as a user runs it: where the modes differ, a fresh process's
    plain loop was asked, and the headline is the mode its page faults say."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GPUPLAY_IN_PROCESS")}
    env["GPUPLAY_STATE_DIR"] = str(tmp_path / "state")
    cmd = [
        sys.executable,
        "-m",
        "gpuplay",
        "run",
        "elementwise",
        "-s",
        "n=4000000",
        "--budget",
        "0.3",
        "--format",
        "json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads(done.stdout)["results"][0]
    c = r["conditions"]
    assert "other_mode" in r and r["summary"]["median"] == statistics.median(r["samples_s"])
    if r["other_mode"] is None:  # the modes did not differ here: nothing to ask, one figure
        assert "alloc_plain_loop" not in c
        return
    plain, probe = c["alloc_plain_loop"], c["alloc_cold_probe"]
    warm_faults = r["other_mode"]["faults_per_step"] if c["alloc"] == "cold" else c["page_faults_per_step"]
    faulted = plain["faults_per_step"] >= max(1000, 0.5 * probe["cold_faults_per_step"], 2 * warm_faults)
    assert c["alloc"] == ("cold" if faulted else "warm")
    assert r["other_mode"]["headline"] == ("pages returned" if faulted else "pages reused")
