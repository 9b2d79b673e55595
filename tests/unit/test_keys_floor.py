"""`benchmarks/speed_app.py` drives any app, not only gpuplay, so that
`benchmarks/textual_keys_floor.py` times a bare Textual app with the same tmux code (docs/benchmarks.md,
the keys' floor)."""

from __future__ import annotations

import math
import shlex
import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# Shows what speed_app waits for, then writes each key it reads (in the first columns: the
# sidebar region speed_app watches for Down) until q.
FAKE_APP = r"""
import os, sys, termios, tty
fd = sys.stdin.fileno()
old = termios.tcgetattr(fd)
tty.setraw(fd)
try:
    os.write(1, b"scenarios\r\nphase     done\r\n")
    n = 0
    while True:
        data = os.read(fd, 64)
        if not data or data == b"q":
            break
        n += 1
        os.write(1, f"key {n}: {data!r}\r\n".encode())
finally:
    termios.tcsetattr(fd, termios.TCSADRAIN, old)
"""


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_speed_app_times_the_app_it_is_given(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import speed_app

    script = tmp_path / "fake_keys_app.py"
    script.write_text(FAKE_APP)
    app = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    first, keys, quit_s, cpu = speed_app.one_app(
        str(tmp_path), 1, ("Down", "t"), app=app, marker=b"fake_keys_app"
    )
    assert 0 < first < 30
    for key in ("Down", "t"):
        assert len(keys[key]) == 1 and 0 < keys[key][0] < 5, keys  # the fake app's change was seen
        assert math.isfinite(cpu[key][0]) and cpu[key][0] >= 0, cpu  # its process was found by marker
    assert 0 < quit_s < 10
