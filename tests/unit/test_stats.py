from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuplay.core.measure.stats import summarize


@given(st.lists(st.floats(min_value=1e-9, max_value=1e3), min_size=1, max_size=200))
def test_summary_matches_numpy(xs):
    s = summarize(xs)
    a = np.array(xs)
    assert np.isclose(s.median, np.median(a))
    assert np.isclose(s.p25, np.percentile(a, 25)) and np.isclose(s.p90, np.percentile(a, 90))
    assert np.isclose(s.mean, a.mean())
    assert s.min == a.min() and s.max == a.max() and s.n == len(xs)


def test_empty_is_none():
    assert summarize([]) is None
