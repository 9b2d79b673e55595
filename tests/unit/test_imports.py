"""The core and `gpuplay --help` load neither Textual, torch nor CuPy (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import sys, io, contextlib
import gpuplay.core.spec, gpuplay.core.runner, gpuplay.core.catalogue.planner, gpuplay.core.studies.compare
import gpuplay.core.reports.report, gpuplay.core.catalogue.scenarios, gpuplay.core.measure.telemetry, gpuplay.core.reports.info
import gpuplay.core.reports.sessionlog, gpuplay.core.workloads, gpuplay.core.backends
from gpuplay.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["--help"])
    except SystemExit:
        pass
heavy = sorted(m for m in ("textual", "torch", "cupy", "plotext") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_core_and_help_import_no_heavy_modules():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "none"


def test_core_modules_never_import_textual_in_source():
    from pathlib import Path

    import gpuplay.core

    for path in Path(gpuplay.core.__file__).parent.rglob("*.py"):
        text = path.read_text()
        assert "import textual" not in text and "from textual" not in text, path
