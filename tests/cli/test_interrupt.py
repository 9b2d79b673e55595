"""Headless, nothing lost: real signals sent to real `gpuplay` processes.

The process is started from Python (a background job of a non-interactive shell would
ignore SIGINT) and signalled once the session log shows finished measurements.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.cli.interrupt import Interruption
from gpuplay.core.reports.sessionlog import read_log
from tests.tui_helpers import tiny_scenarios


def _logged(state: Path) -> list[dict]:
    logs = sorted((state / "sessions").glob("*.jsonl")) if (state / "sessions").is_dir() else []
    return [d for path in logs for d in read_log(path)]


def _signal_after(args: list[str], tmp_path: Path, signum: int, finished: int) -> tuple[int, str, str, list]:
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}  # the real engine
    env |= {"GPUPLAY_STATE_DIR": str(state), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gpuplay", "--scenarios", str(tiny_scenarios(tmp_path / "sc")), *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while len(_logged(state)) < finished:
            assert proc.poll() is None, f"exited early: {proc.communicate()}"
            assert time.monotonic() < deadline, "never logged enough measurements"
            time.sleep(0.05)
        proc.send_signal(signum)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10, "the signal did not stop the measurement within a few steps"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, _logged(state)


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_compare_interrupted_prints_and_logs_every_finished_row(tmp_path, signum, code):
    rc, out, err, logged = _signal_after(
        ["compare", "--backends", "numpy", "--budget", "1", "--format", "json"], tmp_path, signum, 2
    )
    assert rc == code, err
    rows = json.loads(out)["results"]
    # Every finished measurement is both printed and in the session log, none twice, none missing.
    assert len(rows) >= 2 and len(rows) < 12
    assert [r["scenario"] for r in rows] == [d["scenario"] for d in logged]
    assert all(r["status"] == "ok" and r["summary"]["n"] >= 1 for r in rows)
    assert re.search(rf"interrupted by {signal.Signals(signum).name}: {len(rows)} of \d+ measurements", err)
    # stderr is a pipe here: one plain progress line per finished measurement, no live bar.
    assert len(re.findall(r"\[\d+/\d+\] ", err)) == len(rows) and "\x1b[" not in err


@pytest.mark.slow
def test_run_with_baseline_interrupted_in_its_pairs_keeps_no_half_measured_row(tmp_path):
    # Both rows come from one paired measurement (NumPy's is its baseline side): a signal during
    # the pairs stops it, and neither row is a finished measurement, so none is printed or logged.
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "GPUPLAY_IN_PROCESS"}  # the real engine
    env |= {"GPUPLAY_STATE_DIR": str(state), "OMP_NUM_THREADS": "1", "GPUPLAY_TRACE": "1"}
    args = ["run", "matmul", "-b", "torch", "--baseline", "--budget", "20", "--format", "csv"]
    cmd = [sys.executable, "-m", "gpuplay", "--scenarios", str(tiny_scenarios(tmp_path / "sc")), *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # the trace says when the pairs start
            seen.append(line)
            if "heard Phase paired" in line:
                break
        assert any("heard Phase paired" in x for x in seen), "".join(seen[-20:])
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 10, "the signal did not stop the pairs within a few steps"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert list(csv.DictReader(io.StringIO(out))) == [] and _logged(state) == []
    assert "interrupted by SIGINT: 0 of 2" in err


def test_interruption_cancels_on_the_first_signal_and_breaks_out_on_the_second():
    before = signal.getsignal(signal.SIGTERM)
    waited_out = False
    with Interruption() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.cancel.wait(5) and stop.exit_code == 143 and stop.name == "SIGTERM"
        os.kill(os.getpid(), signal.SIGINT)  # the second: raised where the main thread waits
        time.sleep(5)
        waited_out = True
    assert not waited_out and stop.exit_code == 143  # the first signal names the exit
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored


@pytest.mark.slow
def test_tune_interrupted_keeps_the_finished_rungs(tmp_path):
    rc, out, err, logged = _signal_after(
        ["tune", "matmul", "-d", "cpu", "--budget-total", "60", "--format", "json"],
        tmp_path,
        signal.SIGINT,
        1,
    )
    assert rc == 130, err
    data = json.loads(out)
    assert data["interrupted"] is True and "interrupted" in data["verdict"]
    rungs = {r["name"]: r for r in data["rungs"]}
    assert rungs["baseline"]["status"] == "measured"
    assert any(
        r["reason"].startswith("not run: interrupted") or r["reason"] == "interrupted" for r in data["rungs"]
    )
    assert "the finished rungs are kept" in err


def test_compare_devices_stopped_by_ctrl_c_exits_130_as_every_command_does(monkeypatch):
    from gpuplay.core.reports import devices_compare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(devices_compare, "run_devices", interrupted)
    res = CliRunner().invoke(main, ["compare", "matmul", "--backends", "numpy", "--devices", "cpu"])
    assert res.exit_code == 130, res.output  # was 1, an error, against cli/exitcodes.py
    assert "interrupted by SIGINT" in res.stderr
