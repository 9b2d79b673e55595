"""The headline is the allocation mode a plain loop in a fresh process gets; the other beside it."""

from __future__ import annotations

import csv
import io
import statistics
import threading

import pytest

from gpuplay.core.reports.report import headline_time, to_csv
from gpuplay.core.runner import measure, run
from gpuplay.core.runner.alloc import page_returner
from gpuplay.core.runner.plainloop import plain_loop_faults
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import Row

needs_glibc = pytest.mark.skipif(page_returner() is None, reason="malloc_trim is glibc's")

# 8 MB float64 outputs: past the probe's 4 MiB, a step of a few ms.
SPEC = dict(params={"n": 1_000_000}, dtype="float64", budget_s=0.1, warmup=2)


def _run_with_plain_loop_reading(monkeypatch, faults: float):
    """A run whose fresh-process plain loop read `faults` per step (the child is real elsewhere)."""
    asked: list[RunSpec] = []

    def reading(spec, steps, cancel):
        asked.append(spec)
        return {"faults_per_step": faults, "steps": steps}

    monkeypatch.setattr(measure, "plain_loop_faults", reading)
    monkeypatch.setattr(measure, "modes_differ", lambda probe, f, m: True)  # the modes differ here
    r = run(RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2))
    assert r.status == "ok", r.message
    assert len(asked) == 1
    return r


@needs_glibc
def test_a_plain_loop_that_faults_makes_the_pages_returned_loop_the_headline(monkeypatch):
    r = _run_with_plain_loop_reading(monkeypatch, 1e6)
    assert r.conditions["alloc"] == "cold"
    other = r.other_mode
    assert other is not None and other["mode"] == "warm" and other["name"] == "pages reused"
    assert other["headline"] == "pages returned" and other["median_s"] > 0
    # The headline and everything derived from it are the pages-returned loop's samples.
    assert r.median == statistics.median(r.samples)
    # 238 to 1,260 of the 1,953 pages a step seen, as other tests ran first in this process or none did
    assert r.conditions["page_faults_per_step"] >= 100, "each headline step faulted its output in"
    d = r.to_dict()
    assert d["summary"]["median"] == r.median and d["other_mode"] == other
    assert d["gflops"] == pytest.approx(r.flops / r.median / 1e9)
    shown = headline_time(r)
    assert shown.endswith(" with pages reused") and " · " in shown
    assert any(n.startswith("allocation mode: the figure is pages returned") for n in r.notes)


@needs_glibc
def test_a_plain_loop_that_reuses_pages_keeps_the_timed_loop_and_names_the_other(monkeypatch):
    r = _run_with_plain_loop_reading(monkeypatch, 0.0)
    assert r.conditions["alloc"] == "warm"
    other = r.other_mode
    assert other is not None and other["name"] == "pages returned" and other["headline"] == "pages reused"
    assert other["median_s"] == r.conditions["alloc_cold_probe"]["cold_median_s"]
    header, row = list(csv.reader(io.StringIO(to_csv([Row(r)]))))[:2]
    cells = dict(zip(header, row, strict=True))
    assert cells["headline_mode"] == "pages reused" and cells["other_mode"] == "pages returned"
    assert float(cells["other_mode_median_s"]) == pytest.approx(other["median_s"])


@needs_glibc
def test_an_explicit_mode_is_timed_alone(monkeypatch):
    monkeypatch.setattr(
        measure, "plain_loop_faults", lambda *a: pytest.fail("no plain loop for --alloc warm")
    )
    r = run(
        RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2, alloc="warm")
    )
    assert r.status == "ok" and r.other_mode is None and r.conditions["alloc"] == "warm"


@needs_glibc
def test_the_plain_loop_child_counts_a_fresh_processs_page_faults(monkeypatch):
    spec = RunSpec.make("elementwise", {"n": 1_000_000}, dtype="float64")
    # A fixed mmap threshold below the 8 MB arrays: each one is mapped and unmapped, and every step
    # faults its three arrays in (5,862 pages) whatever glibc would have adapted to. NumPy's huge
    # pages off: with them (transparent huge pages in madvise mode) the count read 1,263 or 1,774.
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "0")
    cold = plain_loop_faults(spec, 5, threading.Event())
    assert cold is not None and cold["faults_per_step"] >= 4000 and cold["steps"] == 10
    cancelled = threading.Event()
    cancelled.set()
    assert plain_loop_faults(spec, 5, cancelled) is None, "a cancelled run waits for no child"


@needs_glibc
def test_the_api_result_names_the_other_mode_beside_its_median(monkeypatch, tmp_path):
    import gpuplay

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(
        measure, "plain_loop_faults", lambda spec, steps, cancel: {"faults_per_step": 1e6, "steps": 5}
    )
    monkeypatch.setattr(measure, "modes_differ", lambda probe, faults, median: True)
    r = gpuplay.run("elementwise", params={"n": 1_000_000}, dtype="float64", budget_s=0.1)
    assert r.median == statistics.median(r.samples)
    assert r.other_mode is not None and r.other_mode["name"] == "pages reused"
    assert r.to_dict()["other_mode"] == r.other_mode
    assert " with pages reused" in repr(r)


def test_the_modes_differ_by_their_page_faults_and_the_plain_loop_picks_one():
    from gpuplay.core.runner.alloc import modes_differ, plain_loop_mode

    # elementwise 4M torch: 11,718 more faults per step than a 40 ms loop; a 1024² matmul: ~1,000
    assert modes_differ({"cold_faults_per_step": 11_718, "ratio": 1.03}, 0, 0.040)
    assert not modes_differ({"cold_faults_per_step": 1_024, "ratio": 1.4}, 0, 0.075)
    assert not modes_differ({"cold_faults_per_step": 15_600, "ratio": 1.0}, 15_594, 0.1), "both fault"
    probe = {"cold_faults_per_step": 15_625}
    assert plain_loop_mode({"faults_per_step": 14_482}, probe, 0) == "cold"
    assert plain_loop_mode({"faults_per_step": 3_906}, probe, 0) == "warm"
    assert plain_loop_mode(None, probe, 0) is None
