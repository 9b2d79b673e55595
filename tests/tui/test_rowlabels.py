"""Compare's rows and bars say what tells them apart: four PyTorch rows that differ only in
dtype or AMP read as four different labels, in the table, the bar chart and the roofline."""

from __future__ import annotations

import pytest

from gpuplay.core.spec import RunSpec
from gpuplay.tui.barchart import bar_lines
from gpuplay.tui.rowlabels import distinct_labels
from tests.snapshot_feed import feed_dtypes
from tests.tui_helpers import tiny_scenarios, wait_until

BASE = RunSpec.make(workload="matmul", backend="numpy")
TORCH = BASE.replace(backend="torch")


def test_labels_name_the_backend_and_what_differs():
    specs = [
        BASE,
        TORCH,
        TORCH.replace(dtype="bfloat16"),
        TORCH.replace(dtype="float64"),
        TORCH.replace(amp="fp16"),
    ]
    assert distinct_labels(specs) == [
        "numpy float32",
        "torch float32",
        "torch bfloat16",
        "torch float64",
        "torch float32 +amp:fp16",
    ]
    assert distinct_labels([BASE, TORCH]) == ["numpy cpu", "torch cpu"]  # only the backend differs
    assert distinct_labels([TORCH, TORCH.replace(compile="default")]) == ["torch", "torch +compile"]
    assert distinct_labels([]) == []
    # the same configuration measured again is numbered, not a second identical row
    assert distinct_labels([BASE, TORCH, TORCH]) == ["numpy cpu", "torch cpu", "torch cpu · run 2"]


def test_a_bar_chart_labels_every_bar_and_stays_inside_its_width():
    labels = ["numpy float32", "torch float32 +amp:fp16", "a label much longer than half the chart"]
    lines = bar_lines(labels, [1.0, 4.08, 2.0], ["1×", "4.08×", "2×"], width=44)
    plain = [line.plain for line in lines]
    assert all(len(p) <= 44 for p in plain), plain
    assert plain[0].strip().startswith("numpy float32") and plain[1].endswith("4.08×")
    assert plain[2].lstrip().startswith("a label much") and "…" in plain[2]
    assert plain[1].count("█") > plain[0].count("█")  # the longest bar is the largest value


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 45)])
async def test_compare_rows_and_bars_read_apart_at_every_width(tmp_path, size):
    from gpuplay.tui.app import GpuPlayApp
    from gpuplay.tui.widgets import CompareChart, CompareView

    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], autostart=False, telemetry=False, export_dir=tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: app.probed)
        feed_dtypes(app)
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one("#compare-table")
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert len(set(names)) == 5 and not any("…" in n for n in names), names
        chart = app.query_one(CompareChart)
        screen = ["".join(s.text for s in chart.render_line(y)).rstrip() for y in range(chart.size.height)]
        text = "\n".join(screen)
        title = " ".join(" ".join(screen[:2]).split())
        assert title.startswith("speedup") and "(×," in title, text  # the title and its unit, at 80×24 too
        # The bars are paired speedups beside the table's own medians: the words say they are not
        # the medians' ratio (a 3.47× bar over medians of 16.7 and 4.61 ms read as a mistake).
        assert (
            "paired, not the medians' ratio" in title
            or "pairs with it: not the ratio of the medians" in title
        )
        for name in ("numpy float32", "torch float32", "torch bfloat16", "torch float64", "+amp:fp16"):
            assert name in text, text
        assert app.query_one(CompareView).columns[0] == "configuration"


def test_the_chart_says_how_its_speedups_were_timed():
    """Paired speedups are not the ratio of the medians shown beside them; a speedup from medians
    measured apart is marked "~" in the table and named in the chart's title."""
    from gpuplay.core.catalogue.scenarios import load_scenarios, spec_for
    from gpuplay.core.studies.compare import Row
    from gpuplay.tui.widgets import how_timed
    from tests.snapshot_feed import fixed_result

    base_spec = spec_for(load_scenarios([]).get("matmul"), "quick", {"n": 64})[0]
    base = fixed_result(base_spec, 0.0167, 1e-7)
    paired = fixed_result(base_spec.replace(backend="torch"), 0.00461, 1e-7)
    paired.speedup = {"point": 3.47, "interval": [3.4, 3.55], "pairs": 24}
    apart = fixed_result(base_spec.replace(backend="torch", dtype="bfloat16"), 0.004, 1e-3)
    own, p, a = Row(base, base), Row(paired, base), Row(apart, base)
    assert p.speedup == 3.47 and a.speedup == 0.0167 / 0.004  # the pairs' figure; the medians' ratio
    assert how_timed([own, p]) == ", each timed in pairs with it: not the ratio of the medians"
    assert "else the ratio of the medians (~)" in how_timed([own, p, a]) and a.speedup_marker == "~"
    assert how_timed([own, a]) == ", the ratio of medians measured apart"
    assert how_timed([own, p], short=True) == "; paired, not the medians' ratio"
    assert how_timed([own]) == ""
