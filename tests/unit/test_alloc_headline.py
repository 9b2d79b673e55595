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
from gpuplay.core.runner.plainloop import plain_loop
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import Row

needs_glibc = pytest.mark.skipif(page_returner() is None, reason="malloc_trim is glibc's")

# 8 MB float64 outputs: past the probe's 4 MiB, a step of a few ms.
SPEC = dict(params={"n": 1_000_000}, dtype="float64", budget_s=0.1, warmup=2)


# A fixed mmap threshold below the 8 MB arrays: in a child started with it, each one is mapped
# and unmapped, and every step faults its arrays in (5,862 pages) whatever glibc would have adapted
# to. NumPy's huge pages off: with them (transparent huge pages in madvise mode) the count read
# 1,263 or 1,774. The test process itself keeps its own (adapted) thresholds.
FAULTING_CHILD = {"MALLOC_MMAP_THRESHOLD_": "65536", "NUMPY_MADVISE_HUGEPAGE": "0"}


@pytest.fixture
def faulting_child(monkeypatch):
    for k, v in FAULTING_CHILD.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(measure, "modes_differ", lambda probe, f, m: True)  # the modes differ here


def _fresh_loops_reading(
    monkeypatch, faults: list[float], step_s: float | list[float], bound: bool = False, far: bool = False
) -> list[float]:
    """Fresh plain loops that read `faults` per step in turn, each 12 steps of `step_s` (one for
    all, or one a loop; the child is real elsewhere); the modes differ; `bound`: the engine's own
    steps fault enough to matter; `far`: the cold probe read the other mode FLIP_RATIO slower and
    the first loop spent a step in it.
    Returns the counts handed out, as they are asked for."""
    readings = iter(faults)
    steps = iter(step_s if isinstance(step_s, list) else [step_s] * len(faults))
    asked: list[float] = []

    def reading(spec, budget_s, cancel, max_steps=None):
        asked.append(next(readings))
        # With `bound`, the loop's faults moved from step to step (its mean far from its median).
        mean = asked[-1] + (10_000.0 if bound else 0.0)
        return {"faults_per_step": asked[-1], "mean_faults_per_step": mean, "steps": 12,
                "samples_s": [next(steps)] * 12}  # fmt: skip

    monkeypatch.setattr(measure, "plain_loop", reading)
    monkeypatch.setattr(measure, "modes_differ", lambda probe, f, m: True)  # the modes differ here
    # Whatever this process's allocator did before (the engine's steps faulted 1,320 pages a step
    # here after other tests, none alone).
    monkeypatch.setattr(measure, "allocation_bound", lambda f, m: bound)
    monkeypatch.setattr(measure, "modes_far_apart", lambda probe: far)
    monkeypatch.setattr(measure, "met_both_modes", lambda plain, probe, f: far)  # tested on its own below
    return asked


def _run_with_plain_loop_reading(monkeypatch, faults: float):
    """A run whose fresh-process plain loop read `faults` per step."""
    asked = _fresh_loops_reading(monkeypatch, [faults], 1.0)
    r = run(RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2))
    assert r.status == "ok", r.message
    assert len(asked) == 1
    return r


@needs_glibc
def test_a_fresh_plain_loop_that_faults_is_the_headline_and_the_engines_loop_is_named_beside(faulting_child):
    r = run(RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2))
    assert r.status == "ok", r.message
    c = r.conditions
    assert c["alloc"] == "cold" and c["alloc_timed_in"] == "a fresh process's plain loop"
    plain = c["alloc_plain_loop"]
    assert plain["faults_per_step"] >= 4000 and plain["steps"] == len(r.samples) >= 10
    assert "samples_s" not in plain, "the samples are the result's own, not copied into its conditions"
    other = r.other_mode
    assert other is not None and other["mode"] == "warm" and other["name"] == "pages reused"
    assert other["headline"] == "pages returned" and other["median_s"] > 0
    # The headline and everything derived from it are the fresh loop's samples.
    assert r.median == statistics.median(r.samples) and r.median != other["median_s"]
    assert c["page_faults_per_step"] == plain["faults_per_step"]
    d = r.to_dict()
    assert d["summary"]["median"] == r.median and d["other_mode"] == other
    assert d["gflops"] == pytest.approx(r.flops / r.median / 1e9)
    shown = headline_time(r)
    assert shown.endswith(" with pages reused") and " · " in shown
    note = next(n for n in r.notes if n.startswith("allocation mode: the figure is pages returned"))
    assert "timed in a fresh process's plain loop" in note


@needs_glibc
def test_a_plain_loop_that_faults_like_the_engine_keeps_the_timed_loop_and_names_the_other(monkeypatch):
    # Like the engine's loop, whatever that faulted (1,320 pages a step in this process after other
    # tests, 0 alone): fresh_mode's thresholds are tested on their own below.
    monkeypatch.setattr(measure, "fresh_mode", lambda plain, faults, median: "same")
    r = _run_with_plain_loop_reading(monkeypatch, 0.0)
    assert r.conditions["alloc"] == "warm" and "alloc_timed_in" not in r.conditions
    assert r.samples != [1.0] * 12, "the engine's own samples"
    other = r.other_mode
    assert other is not None and other["name"] == "pages returned" and other["headline"] == "pages reused"
    assert other["median_s"] == r.conditions["alloc_cold_probe"]["cold_median_s"]
    header, row = list(csv.reader(io.StringIO(to_csv([Row(r)]))))[:2]
    cells = dict(zip(header, row, strict=True))
    assert cells["headline_mode"] == "pages reused" and cells["other_mode"] == "pages returned"
    assert float(cells["other_mode_median_s"]) == pytest.approx(other["median_s"])


@needs_glibc
def test_an_explicit_mode_is_timed_alone(monkeypatch):
    monkeypatch.setattr(measure, "plain_loop", lambda *a: pytest.fail("no plain loop for --alloc warm"))
    r = run(
        RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2, alloc="warm")
    )
    assert r.status == "ok" and r.other_mode is None and r.conditions["alloc"] == "warm"


@needs_glibc
def test_the_plain_loop_child_times_a_fresh_processs_steps_and_counts_their_faults(monkeypatch):
    spec = RunSpec.make("elementwise", {"n": 1_000_000}, dtype="float64")
    for k, v in FAULTING_CHILD.items():
        monkeypatch.setenv(k, v)
    cold = plain_loop(spec, 0.05, threading.Event(), max_steps=1000)
    assert cold is not None and cold["faults_per_step"] >= 4000 and cold["steps"] >= 10
    assert len(cold["samples_s"]) == cold["steps"] and all(0 < t < 1 for t in cold["samples_s"])
    capped = plain_loop(spec, 5.0, threading.Event(), max_steps=3)
    assert capped is not None and capped["steps"] == 3, "a run's step cap holds in the child too"
    cancelled = threading.Event()
    cancelled.set()
    assert plain_loop(spec, 0.05, cancelled, max_steps=1000) is None, "a cancelled run waits for no child"


def test_a_childs_output_is_read_only_as_finite_bounded_figures():
    from gpuplay.core.runner.plainloop import _reading

    good = _reading('noise\n{"samples_s": [0.002, 0.001, 0.003], "faults": [4070, 0, 0]}')
    assert good == {"faults_per_step": 0.0, "mean_faults_per_step": 1356.7, "steps": 3,
                    "samples_s": [0.002, 0.001, 0.003]}  # fmt: skip
    for bad in ('{"samples_s": [NaN], "faults": [0]}', '{"samples_s": [Infinity], "faults": [0]}',
                '{"samples_s": [0.001], "faults": [-1]}', '{"samples_s": [0.001, 0.002], "faults": [0]}',
                '{"samples_s": [], "faults": []}', '{"samples_s": [1e300], "faults": [0]}',
                '{"samples_s": "0.1", "faults": [0]}', "not json", ""):  # fmt: skip
        assert _reading(bad) is None, bad


@needs_glibc
def test_the_api_result_names_the_other_mode_beside_its_median(faulting_child, monkeypatch, tmp_path):
    import gpuplay

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    r = gpuplay.run("elementwise", params={"n": 1_000_000}, dtype="float64", budget_s=0.1)
    assert r.median == statistics.median(r.samples)
    assert r.other_mode is not None and r.other_mode["name"] == "pages reused"
    assert r.to_dict()["other_mode"] == r.other_mode
    assert " with pages reused" in repr(r)


def test_the_modes_differ_by_their_page_faults_and_a_fresh_loops_median_step_says_which():
    from gpuplay.core.runner.alloc import (
        allocation_bound,
        fresh_mode,
        met_both_modes,
        modes_differ,
        modes_far_apart,
    )

    # elementwise 4M torch: 11,718 more faults per step than a 40 ms loop; a 1024² matmul: ~1,000
    assert modes_differ({"cold_faults_per_step": 11_718, "ratio": 1.03}, 0, 0.040)
    assert not modes_differ({"cold_faults_per_step": 1_024, "ratio": 1.4}, 0, 0.075)
    assert not modes_differ({"cold_faults_per_step": 15_600, "ratio": 1.0}, 15_594, 0.1), "both fault"
    # heat torch 512²: its engine steps faulted 13,000 pages at 35 ms; a 1024² matmul ~1,000 at 75 ms
    assert allocation_bound(13_000, 0.035) and not allocation_bound(1_000, 0.075)
    assert fresh_mode({"faults_per_step": 14_482}, 0, 0.040) == "cold"
    assert fresh_mode({"faults_per_step": 32_000}, 13_000, 0.035) == "cold"
    assert fresh_mode({"faults_per_step": 20_500}, 19_600, 0.045) == "same"
    assert fresh_mode({"faults_per_step": 0}, 5_000, 0.040) == "warm"
    assert fresh_mode({"faults_per_step": 200}, 0, 0.002) == "same", "under a MiB of pages"
    # heat NumPy 512² × 100: 992 pages a step in the engine, none in fresh plain loops, 1.06-1.10× slower
    assert allocation_bound(992, 0.028) and fresh_mode({"faults_per_step": 0}, 992, 0.028) == "warm"
    assert fresh_mode(None, 0, 0.040) is None
    # fft2d torch 1024²: 2.0 ms a step reusing pages, 5.3 returning them; matmul torch 1024², 1.07×
    assert modes_far_apart({"cold_faults_per_step": 4_064, "ratio": 2.65})
    assert not modes_far_apart({"cold_faults_per_step": 1_024, "ratio": 1.07})
    assert not modes_far_apart(None) and not modes_far_apart({"ratio": None})
    # A fresh loop that settled in the engine's mode after steps in the other could have gone
    # either way: fft2d torch, 12,267 pages over 470 steps; elementwise NumPy 4M, 333 over 128
    cold = {"cold_faults_per_step": 4_064, "ratio": 2.65}
    assert met_both_modes({"faults_per_step": 0, "mean_faults_per_step": 26.1, "steps": 470}, cold, 0)
    assert not met_both_modes({"faults_per_step": 0, "mean_faults_per_step": 2.6, "steps": 128}, cold, 0)
    assert not met_both_modes({"faults_per_step": 0, "mean_faults_per_step": 26.1, "steps": 470}, cold, 4_064)
    assert not met_both_modes(None, cold, 0)


@needs_glibc
@pytest.mark.parametrize(
    ("read", "asked", "headline"),
    [
        ((5_000.0, 5_000.0), 2, "cold"),  # two agree: the fresh loop is the headline
        ((5_000.0, 0.0, 0.0), 3, "warm"),  # one fresh loop in the rare mode is outvoted
        ((0.0,), 1, "warm"),  # like the engine's (0 faults): asked once, the engine's loop stays
    ],
)
def test_a_fresh_loop_that_would_replace_the_engines_is_asked_again(monkeypatch, read, asked, headline):
    calls = _fresh_loops_reading(monkeypatch, list(read), 0.5)
    # The engine's own loop faulted nothing here, whatever this process's allocator did before.
    monkeypatch.setattr(
        measure, "fresh_mode", lambda plain, f, m: "cold" if plain["faults_per_step"] else "same"
    )
    r = run(RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2))
    assert r.status == "ok", r.message
    assert len(calls) == asked
    assert r.conditions["alloc"] == headline
    assert (r.samples == [0.5] * 12) == (headline == "cold")
    if asked > 1:
        assert [x["faults_per_step"] for x in r.conditions["alloc_fresh_loops"]] == list(read)
        votes = 2
        assert f"{votes} of {asked} fresh processes met this mode" in r.conditions["alloc_headline"]


def test_the_mode_most_fresh_loops_met_is_the_headlines():
    from gpuplay.core.runner.alloc import fresh_majority

    a, b, c = ({"faults_per_step": f} for f in (4064.0, 0.0, 9000.0))
    assert fresh_majority([(a, "cold"), (b, "same"), (b, "same")]) == ("same", b, 2)
    assert fresh_majority([(a, "cold"), (a, "cold")]) == ("cold", a, 2)
    assert fresh_majority([(a, "cold"), (b, "same"), (c, "warm")]) == ("cold", a, 1), "the median count"
    assert fresh_majority([(None, None), (b, "same")]) == ("same", b, 1), "a loop not run does not vote"
    assert fresh_majority([(None, None)]) == (None, None, 0)


@needs_glibc
@pytest.mark.parametrize(
    ("read", "step_s", "bound", "asked", "median", "far"),
    [
        # heat torch 512²: three fresh processes of one script, 21.7, 41.3 and 41.9 ms
        ((5_000.0, 17_000.0, 18_000.0), [0.0217, 0.0413, 0.0419], False, 3, 0.0413, False),
        # two agree on the mode and not on the figure: a third decides, the middle is the headline
        ((5_000.0, 9_000.0, 7_000.0), [0.030, 0.020, 0.025], False, 3, 0.025, False),
        # the engine's steps fault themselves and the first loop faulted like them, its count
        # moving from step to step: a second is asked; they disagree, so a third
        ((0.0, 5_000.0, 5_000.0), [0.018, 0.030, 0.040], True, 3, 0.030, False),
        # ... and where the second agrees with the first, two are enough and nothing is spread
        ((0.0, 0.0), [0.018, 0.019], True, 2, None, False),
        # fft2d torch 1024²: the modes read 2 and 6.6 ms; the first fresh loop met the engine's,
        # which is one draw: a second met the other, so a third, and the middle is the headline
        ((0.0, 4_064.0, 4_064.0), [0.0020, 0.0066, 0.0065], False, 3, 0.0065, True),
        # ... and where the second met the engine's mode too, two agree and the engine's loop stays
        ((0.0, 0.0), [0.0020, 0.0021], False, 2, None, True),
    ],
)
def test_fresh_processes_that_disagree_give_the_middle_one_and_their_range(
    monkeypatch, read, step_s, bound, asked, median, far
):
    calls = _fresh_loops_reading(monkeypatch, list(read), step_s, bound=bound, far=far)
    monkeypatch.setattr(
        measure, "fresh_mode", lambda plain, f, m: "cold" if plain["faults_per_step"] else "same"
    )
    r = run(RunSpec.make("elementwise", SPEC["params"], dtype="float64", budget_s=0.1, warmup=2))
    assert r.status == "ok", r.message
    assert len(calls) == asked
    spread = r.fresh_spread
    if median is None:
        assert spread is None and r.conditions["alloc"] == "warm"
        return
    assert r.median == pytest.approx(median), "the middle fresh loop's times are the headline"
    assert (spread["loops"], spread["min_s"], spread["max_s"]) == (3, min(step_s), max(step_s))
    assert r.conditions["alloc_timed_in"] == "a fresh process's plain loop"
    words = r.conditions["alloc_headline"]
    assert "the middle of 3" in words and "3 fresh processes of the same loop read" in words
    assert words.startswith("pages returned, ") == (r.conditions["alloc"] == "cold")
    assert "the heap's state differs from one process to the next" in words
    assert [x["median_s"] for x in r.conditions["alloc_fresh_loops"]] == pytest.approx(step_s)
    lo, hi = (f"{t * 1e3:.3g} ms" for t in (min(step_s), max(step_s)))
    assert f"({lo}–{hi} in 3 fresh processes)" in headline_time(r)
    header, row = list(csv.reader(io.StringIO(to_csv([Row(r)]))))[:2]
    cells = dict(zip(header, row, strict=True))
    assert float(cells["fresh_min_s"]) == pytest.approx(min(step_s))
    assert float(cells["fresh_max_s"]) == pytest.approx(max(step_s))
    from gpuplay.results import Result

    api = Result(Row(r))
    assert api.median == pytest.approx(median) and api.to_dict()["fresh_spread"] == spread
    assert "in 3 fresh processes)" in api._cells()[3]


def test_a_spread_is_read_from_the_loops_that_ran_and_only_past_ten_percent():
    from gpuplay.core.runner.alloc import fresh_spread, middle_loop

    def loop(t, f=0.0):
        return {"samples_s": [t] * 5, "faults_per_step": f}

    assert fresh_spread([(loop(0.010), "same"), (loop(0.0109, 9e3), "cold")]) is None, "within 10 %"
    assert fresh_spread([(loop(0.010), "same"), (None, None)]) is None, "one loop ran"
    # 20 % apart with the same page faults: the machine's noise, not two heaps
    assert fresh_spread([(loop(0.010, 5e3), "cold"), (loop(0.012, 5.1e3), "cold")]) is None
    got = fresh_spread([(loop(0.010, 1.0), "same"), (None, None), (loop(0.0111, 900.0), "cold")])
    assert got == {"loops": 2, "min_s": 0.010, "max_s": 0.0111, "faults_min": 1.0, "faults_max": 900.0}
    a, b, c = loop(0.03), loop(0.01), loop(0.02)
    assert middle_loop([(a, "cold"), (b, "same"), (c, "warm")]) == (c, "warm")
    assert middle_loop([(a, "cold"), (None, None), (b, "same")]) == (a, "cold"), "of two, the first asked"


def test_a_fresh_loop_whose_faults_moved_from_step_to_step_is_unsettled():
    from gpuplay.core.runner.alloc import unsettled

    def loop(median_faults, mean_faults, t=0.020):
        return {"samples_s": [t] * 5, "faults_per_step": median_faults, "mean_faults_per_step": mean_faults}

    assert unsettled(loop(1_984, 5_835)), "heat torch 512²'s first fresh loop"
    assert not unsettled(loop(1_000, 1_010, 0.025)), "matmul NumPy 1024²: a steady count"
    assert not unsettled(None)


@pytest.mark.parametrize(
    "spread",
    [
        {"loops": 3, "min_s": float("nan"), "max_s": 0.04},
        {"loops": 3, "min_s": 0.02, "max_s": float("inf")},
        {"loops": "[/]\x1b[31m", "min_s": 0.02, "max_s": 0.04},
        {"loops": 3, "min_s": 0.05, "max_s": 0.04},  # a range that runs backwards
        {"loops": 3, "min_s": 0.02, "max_s": 1e300},
        {"loops": 3, "min_s": 0.02},
        {"loops": True, "min_s": 0.02, "max_s": 0.04},  # a range is of two processes at least
        {"loops": 1.5, "min_s": 0.02, "max_s": 0.04},
        "[bold]3 fresh processes[/]",
        [[[[0.02]]]],
    ],
)
def test_a_files_fresh_spread_that_is_not_a_finite_range_is_dropped_not_shown(spread):
    from gpuplay.core.result import RunResult
    from gpuplay.results import Result

    r = run(RunSpec.make("elementwise", {"n": 1000}, budget_s=0.05, warmup=1, repeat=5))
    d = r.to_dict()
    d["conditions"]["alloc_fresh_spread"] = spread
    loaded = RunResult.from_dict(d)
    assert loaded.fresh_spread is None and loaded.to_dict()["fresh_spread"] is None
    assert "fresh processes" not in headline_time(loaded)
    api = Result(Row(loaded))
    assert api.fresh_spread is None and "fresh processes" not in api._cells()[3]
    header, row = list(csv.reader(io.StringIO(to_csv([Row(loaded)]))))[:2]
    cells = dict(zip(header, row, strict=True))
    assert cells["fresh_min_s"] == cells["fresh_max_s"] == ""
