"""CuPy's memory pool counts no peak: a run's peak memory on CuPy is n/a, with what the pool holds
(set-up and warm-up blocks included) said beside it, never a figure to set beside torch's count."""

from __future__ import annotations

import contextlib
import sys

import pytest

from gpuplay.core.backends.cupy_backend import CupyBackend
from tests.unit.gpu_fakes import FakeCupy

pytestmark = pytest.mark.gpu_fake


def test_cupys_peak_is_na_and_says_what_its_pool_holds(monkeypatch):
    cupy = FakeCupy()
    cupy._pool.total_bytes = lambda: 3 * 2**30  # blocks held since set-up, warm-up included
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(CupyBackend, "_device", lambda self, device: contextlib.nullcontext())
    count, source = CupyBackend().peak_memory("cuda:0")
    assert count is None
    assert source.startswith("n/a: CuPy's memory pool counts no peak") and "3.00 GiB" in source
