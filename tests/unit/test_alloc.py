"""The allocation mode: said beside the figure, the cold one timed on request."""

from __future__ import annotations

import ctypes.util
import os
import sys
import threading

import pytest

from gpuplay.core.runner import run, timed_loop
from gpuplay.core.runner.alloc import allocation_note, page_returner
from gpuplay.core.spec import RunSpec, SpecError

needs_glibc = pytest.mark.skipif(page_returner() is None, reason="malloc_trim is glibc's")


def test_the_note_names_the_mode_and_how_far_the_other_one_is():
    bound = allocation_note("warm", 12_480, {"ratio": 3.2})
    assert bound is not None and bound.startswith("allocation-bound: 12,480 page faults per step")
    assert "up to 3.2× slower" in bound
    flip = allocation_note("warm", 0, {"ratio": 4.5})
    assert flip is not None and "could flip" in flip and "4.5× slower" in flip and "--alloc cold" in flip
    assert allocation_note("warm", 3, {"ratio": 1.05}) is None  # steady either way: nothing to say
    assert allocation_note("warm", 3, None) is None
    cold = allocation_note("cold", 4000, None)
    assert cold is not None and cold.startswith("cold allocation") and "4,000" in cold


def test_the_page_return_runs_between_steps_outside_the_interval():
    events: list[str] = []

    def timer(fn):
        events.append("start")
        fn()
        events.append("stop")
        return 0.001, None

    timed_loop(lambda: events.append("step"), timer, phase="timed", count=2, cancel=threading.Event(),
               between=lambda: events.append("trim"))  # fmt: skip
    # before each step, as the cache flush: every timed step starts with its pages returned
    assert events == ["trim", "start", "step", "stop"] * 2


def test_an_unknown_mode_is_refused_and_cold_is_labelled():
    with pytest.raises(SpecError, match="alloc must be one of auto, warm, cold"):
        RunSpec.make("elementwise", alloc="hot")
    assert RunSpec.make("elementwise", alloc="cold").label().endswith("+alloc:cold")


@needs_glibc
def test_cold_mode_faults_every_step_and_warm_mode_probes_the_cold_one(monkeypatch):
    from gpuplay.core.runner import alloc

    real = alloc.page_returner()
    trims: list[int] = []

    def counting() -> None:
        trims.append(1)
        real()

    monkeypatch.setattr(alloc, "page_returner", lambda: counting)
    params = {"n": 1_000_000}  # 8 MB float64 output: served by mmap or a reused heap
    cold = run(RunSpec.make("elementwise", params, dtype="float64", repeat=4, warmup=1, alloc="cold"))
    assert len(trims) == 5, "pages go back after every warm-up and timed step"
    assert cold.status == "ok", cold.message
    assert cold.conditions["alloc"] == "cold"
    # Each step faults its 8 MB output (1,953 pages) in again; how many of them depends on what
    # the process allocated before: 238 to 1,260 seen, as other tests ran first in it or none did.
    assert cold.conditions["page_faults_per_step"] >= 100, "each step faults its output in again"
    assert any(n.startswith("cold allocation") for n in cold.notes)
    trims.clear()
    warm = run(RunSpec.make("elementwise", params, dtype="float64", repeat=4, warmup=1, alloc="warm"))
    assert 2 <= len(trims) <= 5, "warm steps keep their pages; only the probe's steps return them"
    probe = warm.conditions["alloc_cold_probe"]
    assert probe["cold_faults_per_step"] >= 100 and probe["ratio"] > 0 and probe["steps"] >= 2


def test_the_cold_probe_finds_malloc_trim_without_running_ldconfig(monkeypatch):
    from gpuplay.core.runner import alloc

    def no_child_process(_name):
        raise AssertionError("ctypes.util.find_library runs `ldconfig -p` in a child process")

    monkeypatch.setattr(ctypes.util, "find_library", no_child_process)
    alloc.page_returner.cache_clear()
    try:
        trim = alloc.page_returner()
        if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION"):
            assert trim is not None and trim() in (0, 1)
    finally:
        alloc.page_returner.cache_clear()
