"""An inference runtime that is installed but cannot be imported (a missing shared library, a
wheel for another CUDA) is refused as a missing one is, with the reason and the install line; it
read as a failed measurement with a raw ImportError and no hint."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import gpuplay
from gpuplay.cli import main

pytest.importorskip("torch")
BROKEN = "libonnxruntime.so.1: cannot open shared object file: No such file or directory"


@pytest.fixture
def broken_onnxruntime(tmp_path, monkeypatch):
    """onnxruntime, onnx and onnxscript found by find_spec (installed), onnxruntime's import failing."""
    for name in ("onnxruntime", "onnx", "onnxscript"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ImportError({BROKEN!r})\n" if name == "onnxruntime" else ""
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    # the real packages an earlier test of this worker imported would be found first
    import sys

    for mod in [m for m in sys.modules if m.split(".")[0] in ("onnxruntime", "onnx", "onnxscript")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    yield


ARGS = ["inference", "-s", "runtime=onnxruntime", "-p", "quick", "--budget", "0.02"]


def test_the_command_refuses_it_with_the_reason_and_the_install_line(broken_onnxruntime):
    res = CliRunner().invoke(main, ["run", *ARGS])
    said = (res.stdout + (res.stderr or "")).replace("\n", " ")
    assert res.exit_code == 1, said
    assert "refused: torch cpu float32 +onnxruntime: onnxruntime is installed but cannot be imported" in said
    assert (
        f"(ImportError: {BROKEN})" in said and "reinstall it: pip install onnxruntime onnx onnxscript" in said
    )
    assert "failed" not in said and "Traceback" not in said


def test_the_api_raises_refused(broken_onnxruntime):
    with pytest.raises(gpuplay.Refused, match="onnxruntime is installed but cannot be imported"):
        gpuplay.run("inference", params={"runtime": "onnxruntime"}, preset="quick", budget_s=0.02)
