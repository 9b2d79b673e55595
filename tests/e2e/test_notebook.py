"""The example notebook, executed by a real Jupyter kernel (nbclient + ipykernel), as a user runs it:
every cell must run without an error, and the sweep's chart must be a figure.

Skipped where the notebook extra is not installed, unless GPUPLAY_REQUIRE_NOTEBOOK=1 (CI sets it
after installing the extra: there a missing package fails instead of skipping)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "gpuplay-in-jupyter.ipynb"


def _require(name: str):
    if os.environ.get("GPUPLAY_REQUIRE_NOTEBOOK") == "1":
        return __import__(name)
    return pytest.importorskip(name)


@pytest.mark.long(18)
@pytest.mark.slow  # a real Jupyter kernel runs every cell: ~18 s on two cores
def test_example_notebook_runs_in_a_kernel_with_its_figure(tmp_path):
    nbformat = _require("nbformat")
    nbclient = _require("nbclient")
    for name in ("ipykernel", "pandas", "matplotlib"):
        _require(name)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell on any error
    outputs = [(c.source, o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for _, o in outputs if o.get("output_type") == "error"]
    assert not errors, errors
    plots = [o for src, o in outputs if src.startswith("sw.plot()")]
    assert plots and any("image/png" in o.get("data", {}) for o in plots), "the sweep cell showed no figure"
    html = [o["data"]["text/html"] for _, o in outputs if "text/html" in o.get("data", {})]
    assert any("speedup vs NumPy CPU" in h for h in html), "no result displayed itself as a table"
    ladders = [
        o
        for src, o in outputs
        if src.startswith("ladder = gpuplay.tune(") and "text/html" in o.get("data", {})
    ]
    assert ladders and "kept" in ladders[0]["data"]["text/html"], (
        "the tune cell showed no ladder as a DataFrame"
    )
    text = "".join(str(o.get("text", "")) for _, o in outputs)
    assert "gpuplay:" not in text, f"a magic refused its input: {text}"
