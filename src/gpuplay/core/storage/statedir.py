"""The state folder (engine log, device locks, session logs) found without importing core.config.

core.config's tomllib, dataclasses and platformdirs are 10-20 ms on the 2-core machine: of the
entry's path to the engine's spawn, and of the engine's own start, whose
device lock needs the folder before a NumPy run measures. On Linux, where the answer
is plain XDG (an absolute XDG_STATE_HOME, or none and an absolute HOME), it is platformdirs'
rule repeated here (tests/unit/test_own_speed_round5.py pins the two equal); anything else asks
config.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def state_dir() -> Path:
    """`config.state_dir()`, the same folder (see the module's note)."""
    if os.environ.get("GPUPLAY_STATE_DIR"):
        return Path(os.environ["GPUPLAY_STATE_DIR"])
    xdg, home = os.environ.get("XDG_STATE_HOME", ""), os.environ.get("HOME", "")
    if sys.platform == "linux" and os.path.isabs(xdg):
        return Path(xdg) / "gpuplay"
    if sys.platform == "linux" and not xdg and os.path.isabs(home):
        return Path(home) / ".local" / "state" / "gpuplay"
    from gpuplay.core.storage.config import state_dir as config_state_dir

    return config_state_dir()
