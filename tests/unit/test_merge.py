"""Merging result files: one column per file, rows matched by scenario, size and configuration."""

from __future__ import annotations

import json

import pytest

from gpuplay.core.reports.merge import MergeError, load_source, merge, to_markdown


def _doc(cpu, rows):
    return {
        "environment": {"gpuplay": "0.1.0", "cpu": cpu, "cores": 2, "torch": "2.13.0", "numpy": "2.4.6"},
        "results": [
            {"scenario": sc, "size": size, "label": label, "status": "ok", "spec": {"workload": sc},
             "summary": {"median": med, "iqr": med * 0.1}, "conditions": {"device_name": dev},
             "finished": "2026-11-22T04:00:00"}
            for sc, size, label, med, dev in rows
        ],
    }  # fmt: skip


def test_merge_two_machines(tmp_path):
    a, b = tmp_path / "laptop.json", tmp_path / "h100.json"
    a.write_text(json.dumps(_doc("i7", [("matmul", "4096²", "torch cpu float32", 0.5, "i7")])))
    b.write_text(json.dumps(_doc("EPYC", [("matmul", "4096²", "torch cpu float32", 0.2, "EPYC"),
                                          ("matmul", "4096²", "torch cuda:0 float32", 0.002, "H100")])))  # fmt: skip
    sources = [load_source(a), load_source(b)]
    rows = merge(sources)
    assert [(r.label, [c is not None for c in r.cells]) for r in rows] == [
        ("torch cpu float32", [True, True]),
        ("torch cuda:0 float32", [False, True]),
    ]
    md = to_markdown(sources, rows)
    assert "| laptop.json | h100.json |" in md
    assert "EPYC + H100" in md and "2026-11-22" in md and "500 ms ±5.0%" in md and "2 ms ±5.0%" in md


def test_same_file_name_twice_gets_distinct_columns(tmp_path):
    (tmp_path / "x").mkdir()
    for p in (tmp_path / "r.json", tmp_path / "x" / "r.json"):
        p.write_text(json.dumps(_doc("c", [("fft", "n", "numpy cpu float32", 1.0, "c")])))
    sources = [load_source(tmp_path / "r.json"), load_source(tmp_path / "x" / "r.json")]
    merge(sources)
    assert [s.name for s in sources] == ["r.json (1)", "r.json (2)"]


@pytest.mark.parametrize(
    "content,match",
    [
        ("not json", "not JSON"),
        ("{}", "not a gpuplay result file"),
        ('{"environment": {}, "results": []}', "holds no results"),
    ],
)
def test_bad_files_are_named(tmp_path, content, match):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(MergeError, match=match) as info:
        load_source(p)
    assert str(p) in str(info.value)
    with pytest.raises(MergeError, match="no such file"):
        load_source(tmp_path / "missing.json")


def test_collectives_files_of_real_runs_merge(tmp_path):
    """The two collectives result files recorded in benchmarks/results (real gloo runs)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    two = load_source(root / "collectives-allreduce-gloo2-cpu-2core.json")
    four = load_source(root / "collectives-all-gloo4-cpu-2core.json")
    rows = merge([two, four])
    labels = {r.label for r in rows}
    assert labels == {"gloo × 2 ranks on 1 node(s)", "gloo × 4 ranks on 1 node(s)"}
    ar16 = [r for r in rows if r.scenario == "all_reduce" and r.size == "16M"]
    assert len(ar16) == 2 and ar16[0].cells[0] is not None and ar16[1].cells[1] is not None
    md = to_markdown([two, four], rows)
    assert "busbw" in md and "| all_to_all | 16M | gloo × 4 ranks on 1 node(s) | — |" in md


def test_markdown_escapes_every_text_from_the_files(tmp_path):
    """Names, statuses, versions and hosts come from the files: a `|` must not split a row, an ESC
    (here a terminal retitle) must not reach the terminal, `[x](y)` must not become a link."""
    doc = _doc("cpu|\x1b[2J", [("mat|mul\x1b]0;pwned\x07", "n", "lab[x](http://e)*b*", 0.5, "d<script>")])
    doc["environment"]["torch"] = "9.9|\x1b[31m"
    doc["results"].append({**doc["results"][0], "label": "other", "status": "bad|\x1b[5m", "summary": None})
    p = tmp_path / "a|b.json"
    p.write_text(json.dumps(doc))
    sources = [load_source(p)]
    md = to_markdown(sources, merge(sources))
    assert "\x1b" not in md and "\x07" not in md and "<script>" not in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    # Every row has the header's cell count: no unescaped pipe split one.
    counts = {len(line.replace("\\|", "").split("|")) for line in table}
    assert len(counts) == 1, table
    assert "lab\\[x\\](http://e)\\*b\\*" in md and "␛\\]0;pwned" in md
