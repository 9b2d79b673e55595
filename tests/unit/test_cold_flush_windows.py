"""Taking the cold-cache flushes out of a window's figures: each rate is taken apart over its own
window's seconds (NVML's over the telemetry window, GPM's over its pair of samples)."""

from __future__ import annotations

import math

import pytest

from gpuplay.core.runner.coldflush import without_flushes

FLUSH_S, FLUSH_DRAM, STEP_DRAM = 0.008, 95.0, 20.0  # one flush alone: 8 ms at 95 % DRAM


def _gpm(dram_counts: float, window_s: float) -> dict:
    return {"dram_active": dram_counts / window_s, "window_s": window_s, "source": "NVML GPM"}


@pytest.mark.parametrize("gpm_wider_s", [0.0, 0.006, 0.06])
def test_gpm_figures_are_taken_apart_over_the_gpm_windows_own_seconds(gpm_wider_s):
    # the timed window: 0.5 s, 40 flushes (0.32 s of the host's) and steps at 20 % DRAM in the rest;
    # its GPM samples bracket it gpm_wider_s wider (idle there), as a loaded host takes them
    seconds, count, spent = 0.5, 40, 0.32
    steps_s = seconds - spent
    counts = STEP_DRAM * steps_s + FLUSH_DRAM * FLUSH_S * count
    gpu = {"util_mean_percent": 90.0, "activity": _gpm(counts, seconds + gpm_wider_s)}
    # the flushes alone: 150 of them over 1.2 s of telemetry, their GPM window wider again
    alone_n, alone_s = 150, 1.2
    alone = {
        "util_mean_percent": 100.0,
        "activity": _gpm(FLUSH_DRAM * FLUSH_S * alone_n, alone_s + gpm_wider_s),
    }
    done = without_flushes(gpu, seconds, (count, spent), alone, alone_s, alone_n)
    assert "40 cold-cache flushes taken out" in done
    # the steps' counts over the rest of its window
    truth = STEP_DRAM * steps_s / (seconds + gpm_wider_s - spent)
    assert gpu["activity"]["dram_active"] == pytest.approx(truth, rel=1e-9)
    assert gpu["activity"]["window_s"] == seconds + gpm_wider_s


@pytest.mark.parametrize("bad", [None, 0.0, -1.0, math.nan, math.inf, True, "0.5"])
def test_a_gpm_window_of_no_usable_length_makes_the_activity_n_a(bad):
    gpu = {"activity": {"dram_active": 50.0, "window_s": 0.5}}
    alone = {"activity": {"dram_active": 95.0, "window_s": bad}}
    without_flushes(gpu, 0.5, (10, 0.1), alone, 1.2, 150)
    assert "could not be measured apart" in gpu["activity"]["reason"]


def test_flushes_that_took_nearly_all_the_window_leave_every_figure_n_a():
    gpu = {"util_mean_percent": 90.0, "power_mean_w": 400.0, "energy_j": 200.0,
           "activity": {"dram_active": 90.0, "window_s": 0.5}}  # fmt: skip
    done = without_flushes(
        gpu, 0.5, (60, 0.49), {"activity": {"dram_active": 95.0, "window_s": 1.2}}, 1.2, 150
    )
    assert done.startswith("n/a: the cold-cache flushes took 98%")
    assert gpu["util_mean_percent"] is None and gpu["energy_j"] is None
    assert "nearly all" in gpu["activity"]["reason"]


@pytest.mark.parametrize("side", ["run", "alone"])
def test_a_gpm_window_of_unsure_length_makes_the_activity_n_a_not_a_wrong_count(side):
    """A host held up 0.16 s while taking a sample made a 1.21 s window read 1.37 s; the steps'
    DRAM, taken apart over it, read 38 % for 16 % (the simulated H100 under three busy loops)."""
    run = {"dram_active": 67.9, "window_s": 1.37}
    alone = {"dram_active": 93.1, "window_s": 1.21}
    (run if side == "run" else alone)["window_unsure_s"] = 0.08
    gpu = {"util_mean_percent": 90.0, "activity": run}
    without_flushes(gpu, 1.21, (93, 0.86), {"activity": alone}, 1.21, 141)
    assert "dram_active" not in gpu["activity"]
    assert "held up 80 ms while taking a GPM sample" in gpu["activity"]["reason"]
