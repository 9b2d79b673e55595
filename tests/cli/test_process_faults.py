"""Fault cases of the `gpuplay` process itself, each through a real process as a user meets it:
a Ctrl+C at any moment of a command, an engine that ends as it starts, closed streams."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUN = ["run", "matmul", "-p", "quick"]


def _env(state: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}  # the real engine
    return env | {"GPUPLAY_STATE_DIR": str(state), "OMP_NUM_THREADS": "1", **more}


def _engines_of(state: Path) -> list[int]:
    """Engine processes started with this test's state folder, whoever their parent is now."""
    found = []
    mark = f"GPUPLAY_STATE_DIR={state}\0".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"gpuplay.core.engine.server" in cmd and mark in env:
            found.append(int(pid))
    return found


def _no_engine_left(state: Path) -> list[int]:
    deadline = time.monotonic() + 5
    while (left := _engines_of(state)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


# A Ctrl+C that lands inside a class body's `__set_name__` while gpuplay's commands are imported:
# Python raises it as "RuntimeError: Error calling __set_name__ on 'Field' instance 'done'",
# KeyboardInterrupt its cause (seen at 0.1 s into a run with four test workers on two cores).
_INTERRUPT_IN_SET_NAME = """
import dataclasses, os, signal, sys, time
real = dataclasses.Field.__set_name__
def landing(self, owner, name):
    if owner.__module__ == "gpuplay.core.measure.roofline" and not os.environ.get("LANDED"):
        os.environ["LANDED"] = "1"
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    return real(self, owner, name)
dataclasses.Field.__set_name__ = landing
"""


@pytest.mark.plain_children  # the hook is this test's sitecustomize: coverage's would not run
def test_ctrl_c_inside_an_imports_class_body_is_one_line_and_exit_130(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_INTERRUPT_IN_SET_NAME)
    state = tmp_path / "state"
    env = _env(state, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run([sys.executable, "-m", "gpuplay", *RUN, "--budget", "0.05"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr and "RuntimeError" not in out.stderr, out.stderr
    said = [line for line in out.stderr.splitlines() if "interrupted" in line]
    assert said == ["interrupted by SIGINT"], out.stderr
    assert _no_engine_left(state) == []


_ENDS_AT_ONCE = """
import os, signal, sys
if "gpuplay.core.engine.server" in sys.orig_argv:
    sys.stderr.write("\\x1b[2J[red]broken sitecustomize\\n")
    sys.stderr.flush()
    if os.environ["HOW"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(7)
"""


def _shell(line: str, state: Path) -> subprocess.CompletedProcess[str]:
    gpuplay = f"{sys.executable} -m gpuplay {' '.join(RUN)} --budget 0.05"
    return subprocess.run(["bash", "-c", line.replace("GPUPLAY", gpuplay)], env=_env(state),
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("after_s", [0.0, 0.1, 0.25, 0.6])
@pytest.mark.plain_children  # under --cov, a SIGINT at once landed in coverage's start-up in the child (hung)
def test_ctrl_c_at_any_moment_of_a_run_is_one_line_and_exit_130(tmp_path, after_s):
    """From the early engine's spawn (the process's second thread, the spawner: gpuplay's entry
    has run its first lines) through the imports, click's parsing, the planning and the timed
    loop. It printed a KeyboardInterrupt traceback and died by SIGINT (-2), then click's
    `Aborted!` and exit 1, and only from the measurement on `interrupted by SIGINT` and 130."""
    state = tmp_path / "state"
    cmd = [sys.executable, "-m", "gpuplay", *RUN, "--budget", "20"]
    proc = subprocess.Popen(cmd, env=_env(state), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the early engine was never spawned"
            time.sleep(0.001)
        time.sleep(after_s)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err and "KeyboardInterrupt" not in err, err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert len(said) == 1 and said[0].startswith("interrupted by SIGINT"), err
    assert _no_engine_left(state) == []


@pytest.mark.parametrize("how, said", [("exit", "exit code 7"), ("kill", "killed by SIGKILL")])
def test_an_engine_that_ends_as_it_starts_is_said_with_its_log(tmp_path, how, said):
    """A broken sitecustomize in the engine's interpreter (or the engine killed at once): it waited
    out the 30 s probe timeout and said `refused: … NumPy is still being probed`, exit 1."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_ENDS_AT_ONCE)
    state = tmp_path / "state"
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "gpuplay", *RUN, "--budget", "0.05"],
        env=_env(state, PYTHONPATH=path, HOW=how), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    err = done.stderr
    assert done.returncode == 1, err
    assert "still being probed" not in err and "Traceback" not in err.split("engine.log")[0], err
    assert f"process ended before its backends were probed ({said})" in err, err
    assert str(state / "engine.log") in err
    assert "[red]broken sitecustomize" in err and "\x1b" not in err, err  # its words, escaped
    assert _no_engine_left(state) == []


def test_a_closed_stderr_does_not_fail_a_run_that_measured(tmp_path):
    """`2>&-`: Python sets sys.stderr to None; the first progress line raised, and the run that
    measured fine exited 1 with nothing said (no stderr to say it on)."""
    done = _shell("GPUPLAY 2>&-", tmp_path / "state")
    assert done.returncode == 0
    assert "matmul" in done.stdout and "numpy" in done.stdout


def test_a_closed_stdout_is_said_in_one_line_or_the_out_file_is_written(tmp_path):
    """`>&-`: a traceback (AttributeError on None) and exit 1; with --out nothing goes to stdout."""
    done = _shell("GPUPLAY >&-", tmp_path / "state")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("gpuplay: stdout is closed"), done.stderr
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m gpuplay --version >&-"], env=_env(tmp_path / "state"),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and done.stderr.startswith("gpuplay: stdout is closed"), (
        done.stderr
    )  # written while parsing
    out = tmp_path / "r.json"
    done = _shell(f"GPUPLAY --format json --out {out} >&- 2>&-", tmp_path / "state")
    assert done.returncode == 0
    assert "matmul" in json.dumps(json.loads(out.read_text()))
