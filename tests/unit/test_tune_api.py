"""gpuplay.tune and %gpuplay tune: arguments checked, the Ladder's faces (dict, DataFrame, HTML)."""

from __future__ import annotations

import threading

import pytest

import gpuplay
from gpuplay import notebook
from gpuplay.core.catalogue.scenarios import load_scenarios, spec_for
from gpuplay.core.result import RunResult
from gpuplay.core.studies import tune


def _core_ladder():
    spec = spec_for(load_scenarios([]).get("matmul"), "quick", {"n": 64})[0]
    ladder = tune.plan_ladder(spec, "cpu", "matmul<script>", budget_s=30)

    def measure(s, *, cancel: threading.Event, paired_with=None):
        r = RunResult(spec=s, samples=[0.01] * 9, error=0.0, tolerance=1e-3)
        if paired_with is not None:
            r.speedup = {"point": 1.5, "interval": [1.2, 1.8], "pairs": 9, "method": "t"}
        return r

    return tune.run_ladder(ladder, measure)


def test_the_ladder_object_has_its_rungs_kept_and_an_escaped_table():
    lad = gpuplay.Ladder(_core_ladder())
    assert [r["name"] for r in lad.kept] == ["device", "amp-bf16", "compile", "compile-ma"]
    assert lad.speedup == 1.5 and lad.speedup_interval == (1.2, 1.8)
    assert {"rungs", "verdict"} <= set(lad.to_dict())
    html = lad._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "refused" in html
    assert "| rung |" in lad._repr_markdown_()
    assert "gpuplay.Ladder" in repr(lad)


def test_the_ladder_as_a_dataframe():
    pytest.importorskip("pandas")
    df = gpuplay.Ladder(_core_ladder()).to_pandas()
    assert list(df["name"])[:2] == ["baseline", "device"]
    assert set(df["status"]) <= {"measured", "dropped", "refused"}


@pytest.mark.parametrize(
    ("kw", "words"),
    [({"budget_s": float("nan")}, "finite"), ({"budget_s": 1.0}, "5–3600"), ({"budget_s": True}, "finite")],
)
def test_tune_refuses_a_bad_budget_before_anything_runs(kw, words):
    with pytest.raises(ValueError, match=words):
        gpuplay.tune("matmul", **kw)


def test_tune_refuses_an_unknown_target():
    with pytest.raises(ValueError, match="unknown scenario"):
        gpuplay.tune("no-such-scenario")


def test_the_tune_magic_takes_gpuplay_tunes_arguments(monkeypatch):
    seen = {}
    monkeypatch.setattr(notebook.api, "tune", lambda **kw: seen.update(kw) or "ladder")
    assert notebook.line_magic("tune matmul -p quick -s n=64 --budget-total 20 -d cpu") == "ladder"
    assert seen == {"target": "matmul", "device": "cpu", "preset": "quick", "params": {"n": 64},
                    "budget_s": 20.0, "scenario_dirs": ()}  # fmt: skip
    with pytest.raises(notebook.MagicUsageError, match="not taken by the magic"):
        notebook.line_magic("tune matmul --format json")
    with pytest.raises(notebook.MagicUsageError):
        notebook.line_magic("tune matmul --budget-total 1")
