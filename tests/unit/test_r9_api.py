"""R9 (docs/hardening.md): the Python API's loose ends — its names and file reading in one place
each, and every object `load` hands back shown escaped in a notebook."""

from __future__ import annotations

import pytest

import gpuplay
from gpuplay import api


def test_the_api_names_are_the_packages_less_its_own_two():
    assert sorted(api.__all__) == sorted(set(gpuplay.__all__) - {"__version__", "load_ipython_extension"})


@pytest.mark.parametrize("content", [b"{not json", b"[" * 100_000, b"\xff\xfe"], ids=["bad", "deep", "latin"])
def test_load_and_a_sweep_file_say_the_same_words_about_the_same_bad_file(tmp_path, content):
    from gpuplay.core.reports import sweepreport

    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(ValueError) as by_load:
        gpuplay.load(bad)
    with pytest.raises(sweepreport.SweepFileError) as by_sweep:
        sweepreport.load_sweep(bad)
    assert str(by_load.value) == str(by_sweep.value) and str(bad) in str(by_load.value)


HOSTILE = "<script>alert(1)</script>[red]x\x1b[2J\u202e"


def _escaped(html: str) -> None:
    assert "<script>" not in html and "\x1b" not in html and "\u202e" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;[red]x" in html


def test_a_loaded_csv_shows_as_an_escaped_table_in_a_notebook(tmp_path):
    import csv

    path = tmp_path / "r.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scenario", HOSTILE])
        w.writerow([HOSTILE, "1.5"])
        w.writerow(["matmul", "2", "a cell beyond the header"])  # DictReader's None key
        w.writerows([["s", str(i)] for i in range(600)])
    table = gpuplay.load(path)
    html = table._repr_html_()
    _escaped(html)
    assert html.count("&lt;script&gt;") == 2  # the heading and the cell
    assert "<th>(extra)</th>" in html and "a cell beyond the header" in html
    assert html.count("<tr>") == 1 + 500 and "… 102 more row(s)" in html  # bounded, the rest counted


def test_a_comparison_of_two_loaded_files_shows_escaped_in_a_notebook(tmp_path):
    import json

    r = gpuplay.run("matmul", params={"n": 16}, budget_s=0.05, baseline=False)
    doc = r.run_result.to_dict()
    doc["spec"]["scenario"] = HOSTILE  # a file's words: anything at all
    for name, env in (("old.json", {"torch": "2.12.0"}), ("new.json", {"torch": "<b>2.13</b>"})):
        (tmp_path / name).write_text(json.dumps({"environment": env, "results": [doc]}))
    comparison = gpuplay.load(tmp_path / "old.json").compare(gpuplay.load(tmp_path / "new.json"))
    assert comparison.changes, comparison.text()
    html = comparison._repr_html_()
    _escaped(html)
    assert "within noise" in html and "<b>2.13" not in html
