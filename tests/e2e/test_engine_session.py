"""The engine measures in the caller's session (its own process group): the CPU share a loaded
machine's autogroup scheduler gives it is the one a user's script started there gets."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

RECORDS = """
import os

def inputs(rng, n=64):
    return rng.standard_normal(n)

def step(xp, x):
    with open(os.environ["IDFILE"], "w") as f:
        f.write(f"{os.getpid()} {os.getsid(0)} {os.getpgid(0)}\\n")
    return x * 2
"""


@pytest.mark.real_engine
def test_the_engine_shares_the_callers_session_but_leads_its_own_group(tmp_path):
    code = tmp_path / "records.py"
    code.write_text(RECORDS)
    ids = tmp_path / "ids"
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "IDFILE": str(ids)}
    env.pop("GPUPLAY_IN_PROCESS", None)
    front = subprocess.Popen(
        [sys.executable, "-m", "gpuplay", "run", str(code), "--repeat", "5", "--format", "json"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # as a terminal's job: its own session and group
    )  # fmt: skip
    out, err = front.communicate(timeout=300)
    assert front.returncode == 0, err[-2000:]
    engine, sid, pgid = (int(v) for v in ids.read_text().split())
    assert engine != front.pid
    assert sid == front.pid, "the engine is in the session the command was started in"
    assert pgid == engine, "and leads its own process group: the terminal's Ctrl+C is the front end's"
