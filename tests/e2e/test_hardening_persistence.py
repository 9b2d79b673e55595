"""R5 nothing lost, R6 security: session logs survive kill -9, exports are atomic,
scenario files never execute, no network access anywhere."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.reports.sessionlog import SessionLog, list_sessions, read_log
from gpuplay.core.result import RunResult
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.atomicfile import write_atomic
from tests.tui_helpers import tiny_scenarios

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuplay"


@pytest.mark.slow
def test_kill_9_loses_no_finished_measurement(tmp_path):
    state = tmp_path / "state"
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(state), "OMP_NUM_THREADS": "1"}
    sc = tiny_scenarios(tmp_path / "sc")
    # The live app, measuring continuously, is killed with SIGKILL mid-session.
    app = subprocess.Popen(
        [sys.executable, "-c", APP_SCRIPT, str(sc)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline:
        logs = list((state / "sessions").glob("*.jsonl")) if (state / "sessions").exists() else []
        lines = logs[0].read_text().splitlines() if logs else []
        if len(lines) >= 2:
            break
        time.sleep(0.05)
    os.kill(app.pid, signal.SIGKILL)
    app.wait()
    assert len(lines) >= 2, "the app never logged two measurements"
    logged = list(read_log(logs[0]))
    assert len(logged) >= 2  # every line written before the kill is whole and parses
    assert all(RunResult.from_dict(d).summary is not None for d in logged)
    res = CliRunner(env={"GPUPLAY_STATE_DIR": str(state)}).invoke(main, ["history", "--format", "csv"])
    assert res.exit_code == 0 and "matmul" in res.stdout


APP_SCRIPT = """
import sys, asyncio
from pathlib import Path
from gpuplay.tui.app import GpuPlayApp
async def main():
    app = GpuPlayApp([Path(sys.argv[1])], budget_s=0.05, telemetry=False)
    async with app.run_test(size=(100, 30)) as pilot:
        while True:  # keep measuring until killed
            await pilot.press("b")
            await asyncio.sleep(0.3)
asyncio.run(main())
"""


def test_torn_last_line_is_skipped(tmp_path):
    log = SessionLog(tmp_path)
    r = run(RunSpec.make("matmul", {"n": 16}, repeat=2))
    assert log.append(r)
    with open(log.path, "a") as f:
        f.write('{"scenario": "half a li')  # what a kill mid-write leaves
    assert len(list(read_log(log.path))) == 1
    assert list_sessions(tmp_path) == [log.path]


def test_export_is_atomic(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("previous export")

    def broken_replace(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(target, json.dumps({"x": 1}))
    assert target.read_text() == "previous export"  # never half-written
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


def test_unwritable_log_is_reported_not_raised(tmp_path):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    log = SessionLog(blocked / "sessions")
    assert not log.append(run(RunSpec.make("matmul", {"n": 16}, repeat=1)))
    assert "session log not written" in log.error


NETWORK = re.compile(
    r"^\s*(import|from)\s+(socket|urllib|http|requests|httpx|aiohttp|ftplib|smtplib)\b", re.M
)


# The only modules that may open sockets, and what for: none of them reaches another machine
# unless the user asks (serve --public, collectives under torchrun across nodes).
SOCKETS_ALLOWED = {
    "core/engine/client.py": "a socket pair to its own engine process",
    "core/engine/process.py": "spawns the engine with its end of that socket pair (socketpair, no address)",
    "cli/serve.py": "gpuplay serve: loopback unless --public",
    "cli/serve_web.py": "gpuplay serve's web server (aiohttp), bound where serve.py says",
    "cli/serve_guard.py": "gpuplay serve's Host/Origin checks parse URLs and list this machine's addresses",
    "collectives/launch.py": "local ranks rendezvous on 127.0.0.1",
    "collectives/bench.py": "a rank reports where its rendezvous port is taken",
}


def test_no_network_code_anywhere_else():
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if NETWORK.search(p.read_text()) and str(p.relative_to(SRC)) not in SOCKETS_ALLOWED
    ]
    assert not offenders
    for name in SOCKETS_ALLOWED:
        text = (SRC / name).read_text()
        assert "0.0.0.0" not in text or "--public" in text, f"{name} binds every interface by default"


def test_commands_work_with_the_network_cut(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("gpuplay tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    runner = CliRunner()
    for args in (
        ["info", "--format", "json"],
        ["list"],
        ["run", "heat", "-s", "n=8", "-s", "steps=1", "--repeat", "1", "-b", "torch"],
    ):
        res = runner.invoke(main, args)
        assert res.exit_code == 0, (args, res.output)
