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
from gpuplay.core.runner.alloc import fresh_mode, page_returner

needs_glibc = pytest.mark.skipif(page_returner() is None, reason="malloc_trim is glibc's")
ARGS = ["run", "elementwise", "-s", "n=1000000", "--dtype", "float64", "--budget", "0.1", "--warmup", "2"]


@pytest.fixture
def plain_loop_faults(monkeypatch):
    """The fresh-process plain loop (a real child) maps and unmaps every 8 MB array, so each of its
    steps faults them in (a fixed mmap threshold in its environment; this process keeps its own);
    the modes differ."""
    from gpuplay.core.runner import measure

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "0")
    monkeypatch.setattr(measure, "modes_differ", lambda probe, faults, median: True)


@needs_glibc
def test_the_table_json_and_csv_show_the_plain_loops_mode_first_and_the_other_by_name(plain_loop_faults):
    res = CliRunner().invoke(main, [*ARGS, "--format", "json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)["results"][0]
    assert r["summary"]["median"] == statistics.median(r["samples_s"])
    assert r["conditions"]["alloc"] == "cold", "the headline is the fresh loop, which returned its pages"
    assert r["conditions"]["alloc_timed_in"] == "a fresh process's plain loop"
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
    plain = c["alloc_plain_loop"]
    engine_faults = r["other_mode"]["faults_per_step"] if "alloc_timed_in" in c else c["page_faults_per_step"]
    fresh = fresh_mode(
        plain, engine_faults, r["other_mode"]["median_s"] if "alloc_timed_in" in c else r["summary"]["median"]
    )
    if fresh == "same":  # the engine's loop is the headline, the cold probe beside it
        assert c["alloc"] == "warm" and r["other_mode"]["name"] == "pages returned"
    else:  # the fresh loop's own times are the headline
        assert c["alloc"] == fresh and c["page_faults_per_step"] == plain["faults_per_step"]
        assert len(r["samples_s"]) == plain["steps"]


@pytest.mark.slow
@pytest.mark.real_engine
@needs_glibc
def test_steps_that_fault_inside_themselves_are_timed_in_a_fresh_process_too(tmp_path):
    """Through the engine process: with every 8 MB array mapped and unmapped (a fixed mmap
    threshold for the whole run), each step faults ~5,900 pages in the engine and the cold probe
    faults no more, so the modes do not differ; the steps are allocation-bound all the same, and a
    fresh process's plain loop is asked. It faults as the engine does: the engine's loop stays the
    headline, and the result says what the fresh loop read."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GPUPLAY_IN_PROCESS")}
    env.update(
        GPUPLAY_STATE_DIR=str(tmp_path / "state"), MALLOC_MMAP_THRESHOLD_="65536", NUMPY_MADVISE_HUGEPAGE="0"
    )
    cmd = [sys.executable, "-m", "gpuplay", "run", "elementwise", "-s", "n=1000000", "--dtype", "float64",
           "--budget", "0.2", "--format", "json"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    c = json.loads(done.stdout)["results"][0]["conditions"]
    assert c["page_faults_per_step"] >= 4000, "every step faulted its arrays in"
    assert c["alloc_plain_loop"]["faults_per_step"] >= 4000 and c["alloc"] == "warm"
    assert "as this mode does" in c["alloc_headline"] and "alloc_timed_in" not in c
