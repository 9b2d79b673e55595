"""One lock per GPU whoever names it: a front end (which never loads torch) and a fresh engine's
profile name the simulated H100's lock as an engine that loaded torch does, by its UUID."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.gpu_sim import SIM_UUID, read_ledger, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]

HOLDER = """
import pathlib, sys, time
import torch  # the simulated board's UUID comes from torch, as in an engine that runs a step
from gpuplay.core.engine.devicelock import device_lock
here = pathlib.Path(sys.argv[1])
with device_lock("cuda:0"):
    (here / "held").write_text("1")
    deadline = time.monotonic() + 120
    while not (here / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""

FRONT_END = """
import json, sys
from gpuplay.core.engine.devicelock import who_holds
said = who_holds("cuda:0")
print(json.dumps({"said": said, "torch": "torch" in sys.modules}))
"""


def _hold(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], env=env, stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "held").exists():
        assert holder.poll() is None, "the lock holder died"
        assert time.monotonic() < deadline, "the lock holder never took the lock"
        time.sleep(0.05)
    return holder


def _release(tmp_path: Path, holder: subprocess.Popen[bytes]) -> None:
    (tmp_path / "release").write_text("1")
    holder.wait(60)


def test_a_front_end_without_torch_sees_the_gpu_an_engine_holds(tmp_path):
    env = sim_env("h100", tmp_path)
    holder = _hold(tmp_path, env)
    try:
        out = subprocess.run([sys.executable, "-c", FRONT_END], env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    finally:
        _release(tmp_path, holder)
    seen = json.loads(out.stdout)
    assert seen["torch"] is False  # the front end stays light
    assert seen["said"] and "cuda:0 busy" in seen["said"] and f"pid {holder.pid}" in seen["said"]


def test_a_fresh_engines_profile_waits_for_the_gpu_another_session_holds(tmp_path, sim_h100):
    from gpuplay.core.engine.client import EngineClient
    from gpuplay.core.spec import RunSpec

    holder = _hold(tmp_path, sim_h100.env)
    locks = Path(sim_h100.env["GPUPLAY_STATE_DIR"]) / "locks"
    uuid_lock = f"cuda-{SIM_UUID.removeprefix('GPU-').replace('-', '')}"
    engine = EngineClient(backends=("numpy", "torch"))
    answer: list[dict] = []
    spec = RunSpec("matmul", (("n", 64),), backend="torch", device="cuda:0")
    worker = threading.Thread(target=lambda: answer.append(engine.profile(spec, steps=1)), daemon=True)
    try:
        worker.start()
        deadline = time.monotonic() + 120
        waiting = False
        while not answer and time.monotonic() < deadline:
            waiting = any(p.name.startswith(f"{uuid_lock}.waiting.") for p in locks.iterdir())
            if waiting:
                break
            time.sleep(0.05)
        assert waiting and not answer, f"the profile did not wait for the held GPU: {answer}"
    finally:
        _release(tmp_path, holder)
        worker.join(120)
        engine.close()
    assert answer and answer[0].get("status") != "cancelled"


def test_a_cli_run_says_at_once_that_the_gpu_is_busy_and_who_holds_it(tmp_path):
    """`gpuplay run` on the simulated H100 that another session holds (its lock named by the UUID,
    as an engine names it) says so on stderr from the front end, before its engine has loaded torch."""
    env = sim_env("h100", tmp_path)
    holder = _hold(tmp_path, env)
    run = subprocess.Popen([sys.executable, "-m", "gpuplay", "run", "matmul", "-b", "torch", "-d", "cuda:0",
                            "-s", "n=64", "--budget", "0.1", "--no-baseline", "--no-energy", "--format", "json"],
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    said_at = None
    try:
        assert run.stderr is not None
        for line in run.stderr:
            if "busy" in line:
                said_at, said = time.monotonic(), line
                break
    finally:
        _release(tmp_path, holder)
        rest_out, rest_err = run.communicate(timeout=120)
    assert said_at is not None, f"no busy notice: {rest_err[-2000:]}"
    assert "cuda:0 busy: measuring in another session" in said and f"pid {holder.pid}" in said, said
    assert run.returncode == 0, rest_err[-2000:]
    # the front end said it, not the engine's wait: no torch was loaded in the engine yet then
    ledger = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"], "device")
    engine = [row["t"] for row in ledger if row["pid"] != holder.pid]
    assert engine and said_at < min(engine), (said_at, engine)
