"""An engine that cannot start (the interpreter gone or not executable after an upgrade) is a
message and exit 1, never a traceback: a real process, a real PermissionError from exec."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.real_engine]


@pytest.mark.parametrize(
    "command", [["run", "elementwise", "--budget", "0.1"], ["sweep", "elementwise", "--over", "n=64..64"]]
)
def test_an_interpreter_that_is_not_executable_is_said_in_words(tmp_path, command):
    broken = tmp_path / "python"
    broken.write_text("")  # there, but not executable: exec fails with EACCES
    broken.chmod(0o644)
    driver = f"import sys; sys.executable = {str(broken)!r}; from gpuplay.cli import main; main({command!r})"
    res = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert "could not start the measuring engine" in res.stderr
    assert str(broken) in res.stderr and "PermissionError: Permission denied" in res.stderr
