"""A run waiting for the device says so on stderr, naming the holder: a real second process
holds the device lock, a real `gpuplay run` waits for it."""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

HOLD = (
    "import sys; from gpuplay.core.engine.devicelock import device_lock\n"
    "with device_lock('cpu'):\n"
    "    print('held', flush=True); sys.stdin.read()\n"
)


def test_a_waiting_run_says_the_device_is_busy_and_who_holds_it(tmp_path):
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state"), "OMP_NUM_THREADS": "1"}
    env.pop("GPUPLAY_IN_PROCESS", None)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    run = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        run = subprocess.Popen([sys.executable, "-m", "gpuplay", "run", "elementwise", "--budget", "0.05"],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert run.stderr is not None
        ready, _, _ = select.select([run.stderr], [], [], 120)  # never a wait without end
        assert ready, "gpuplay run said nothing while it waited for the device"
        first = run.stderr.readline()
        assert "cpu busy: measuring in another session" in first, first
        assert (
            f"(pid {holder.pid}: {sys.executable} -c import sys" in first
            and "waiting for it to finish" in first
        )
        assert run.poll() is None  # still waiting: the holder has not let go
        holder.communicate("", timeout=10)
        out, rest = run.communicate(timeout=120)
        assert run.returncode == 0, first + rest
        assert "busy" not in rest  # said once, not once per poll
    finally:
        holder.kill()
        if run is not None:
            run.kill()
