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
    from gpuplay.core import roofline

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
    assert res.exit_code == 0, res.output
    assert "[5 of 5 probes]" in res.stderr  # NumPy: copy, triad, three matmul dtypes
    assert took <= 2 * budget + 1.5, f"{took:.1f} s for a budget of {budget} s"
    said = re.search(r"calibration took ([\d.]+) s against a budget of 1 s: ([\d.]+) s measuring 5 probes",
                     " ".join(res.stderr.split()))  # fmt: skip
    assert said is not None, res.stderr
    assert float(said.group(2)) <= float(said.group(1)) <= took + 0.05


def test_a_matmul_probe_stops_growing_before_a_size_that_would_overrun_its_budget():
    """A probe whose rate still rises with size (each call 4x the last, as a GPU filling up does)
    grew until a call took long enough: to n=1024 here, ~2 s for a 0.3 s share. It now stops
    before the size whose three calls would not fit in what is left."""
    from gpuplay.core import roofline

    def make(n):
        def once():
            time.sleep(0.002 * (n / 64) ** 2)
            return 0.002 * (n / 64) ** 2

        return once

    t0 = time.perf_counter()
    rate, n, best, calls = roofline._matmul_peak(make, 64, 4096, 1.0, 0.3)
    took = time.perf_counter() - t0
    assert n <= 256 and took <= 0.3 + 0.25, (n, took)
    assert calls >= 2 and rate == pytest.approx(2 * n**3 / best / 1e9)
