"""Running Python and gpuplay in a child process, as the tests of start-up, imports and the engine's
end do: the checkout's src/ first, a state folder of the test's own, never the in-process engine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`code` (dedented) in a fresh interpreter, its output captured."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def gpuplay_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """This environment with gpuplay from the checkout and its state in `tmp_path`."""
    env = {
        **os.environ,
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT / "src"),
        **more,
    }
    env.pop("GPUPLAY_IN_PROCESS", None)
    return env
