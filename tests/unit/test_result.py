"""core/result.py: a run's result as written to files and the wire."""

from __future__ import annotations

from gpuplay.core.spec import RunSpec


def test_a_result_field_missing_from_the_key_order_is_still_written(monkeypatch):
    # to_dict orders its keys as files always had them (result._KEY_ORDER); a field added to the
    # result later but not to that list must still reach the files and the wire, not vanish.
    from gpuplay.core.engine import messages as m
    from gpuplay.core.result import _KEY_ORDER, RunResult

    r = RunResult(
        spec=RunSpec.make("matmul", {"n": 64}), samples=[1e-3, 2e-3, 3e-3], error=1e-7, tolerance=1e-5
    )
    assert list(r.to_dict())[: len(_KEY_ORDER)] == list(_KEY_ORDER)  # the order files have had
    real = RunResult._fields
    monkeypatch.setattr(RunResult, "_fields", lambda self: {**real(self), "a_new_field": 42})
    assert r.to_dict()["a_new_field"] == 42
    assert list(r.to_dict())[: len(_KEY_ORDER)] == list(_KEY_ORDER)
    assert b'"a_new_field": 42' in m.encode(m.Finished(1, r))
