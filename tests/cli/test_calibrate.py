"""`gpuplay calibrate`: measure, show, forget; a broken cache or a missing GPU in words."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.measure import roofline
from tests.conftest import gpu_available
from tests.unit.test_roofline import peaks


@pytest.fixture
def cli():
    return CliRunner()


def test_show_without_a_cache_says_what_to_run(cli):
    res = cli.invoke(main, ["calibrate", "--show"])
    assert res.exit_code == 1 and "run gpuplay calibrate" in res.output


def test_show_prints_the_cached_roofs(cli):
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=200.0))
    res = cli.invoke(main, ["calibrate", "--show"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())  # the terminal wraps long lines
    assert "matmul float32" in out and "memory triad" in out
    assert "memory 20.0 GB/s (torch triad)" in out and "float32 10.0" in out  # the ridge
    res = cli.invoke(main, ["calibrate", "--show", "--format", "json"])
    (doc,) = json.loads(res.stdout)
    assert doc["device"] == "cpu" and len(doc["measurements"]) == 5


def test_forget_removes_one_device(cli):
    roofline.save_peaks(peaks("cpu"))
    res = cli.invoke(main, ["calibrate", "--forget", "-d", "cpu"])
    assert res.exit_code == 0 and "cpu: forgotten" in res.output
    assert roofline.load_peaks("cpu").peaks is None


def test_a_corrupt_cache_is_reported_not_raised(cli):
    path = roofline.cache_path("cpu")
    path.parent.mkdir(parents=True)
    path.write_text("{truncated")
    res = cli.invoke(main, ["calibrate", "--show", "-d", "cpu"])
    assert res.exit_code == 1 and "unreadable" in res.output and "Traceback" not in res.output


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_a_gpu_that_is_not_there_is_refused_with_the_reason(cli):
    res = cli.invoke(main, ["calibrate", "-d", "cuda"])
    assert res.exit_code == 2 and "no device cuda:0 to calibrate" in res.output


@pytest.mark.slow
def test_real_calibration_writes_the_cache_and_prints_json(cli, monkeypatch):
    from gpuplay.core.measure import noise

    monkeypatch.setattr(noise, "host_warnings", lambda host, during="": [])  # a shared test machine
    res = cli.invoke(main, ["calibrate", "-d", "cpu", "--budget", "8", "--format", "json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    assert {m["name"] for m in doc["measurements"] if m["kind"] == "memory"} >= {"copy"}
    assert all(r["why"].startswith("budget too short") for r in doc["refused"])
    assert roofline.load_peaks("cpu").peaks is not None


def test_run_outputs_carry_the_roof_in_every_format(cli):
    import csv
    import io

    roofline.save_peaks(peaks("cpu", bw=20.0, f32=200.0))
    args = ["run", "matmul", "-s", "n=64", "--budget", "0.05"]
    res = cli.invoke(main, [*args, "--format", "csv"])
    assert res.exit_code == 0, res.output
    (row,) = list(csv.DictReader(io.StringIO(res.stdout)))
    assert row["roof_status"] == "ok" and row["roof_bound"] in ("memory", "compute")
    assert float(row["intensity_flop_per_byte"]) > 1 and float(row["roof_fraction"]) > 0
    assert row["unstable"] in ("True", "False")
    res = cli.invoke(main, [*args, "--format", "json"])
    (r,) = json.loads(res.stdout)["results"]
    assert r["roof"]["peak_source"] == "numpy matmul n=1024" and isinstance(r["noise_warnings"], list)
    res = cli.invoke(main, args)
    lines = res.stdout.splitlines()
    header = next(line for line in lines if "configuration" in line)
    assert header.rstrip().endswith("roof")
    assert any(line.rstrip().endswith((" C", " M")) and "numpy cpu" in line for line in lines)


def test_uncalibrated_table_says_what_to_run(cli):
    res = cli.invoke(main, ["run", "matmul", "-s", "n=64", "--budget", "0.05"])
    assert res.exit_code == 0, res.output
    assert "roof: not calibrated: run gpuplay calibrate" in res.stdout


def test_info_says_whether_each_device_is_calibrated(cli):
    res = cli.invoke(main, ["info"])
    assert "roofline cpu: not calibrated: run gpuplay calibrate" in " ".join(res.output.split())
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=200.0))
    res = cli.invoke(main, ["info", "--format", "json"])
    (cpu,) = [r for r in json.loads(res.stdout)["roofline"] if r["device"] == "cpu"]
    assert cpu["calibrated"] and cpu["bandwidth_gbs"] == 20.0 and cpu["gflops"]["float32"] == 200.0


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_calibration_keeps_the_probes_that_finished(tmp_path, sig, code):
    """A real `gpuplay calibrate` stopped by a real signal after its second probe: 130/143, a line
    saying k of N probes finished, and `--show` then shows those k (no "nothing calibrated")."""
    env = {**os.environ, "GPUPLAY_STATE_DIR": str(tmp_path / "state")}
    env.pop("GPUPLAY_IN_PROCESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuplay", "calibrate", "-d", "cpu", "--budget", "0.5"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "[2 of " in line:
                proc.send_signal(sig)
                break
        rest, _ = proc.communicate(timeout=120)[1], None
        err = "".join(lines) + rest
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Aborted" not in err and "Traceback" not in err
    m = re.search(r"interrupted \((SIGINT|SIGTERM)\): (\d+) of (\d+) probes finished; (kept in|no peak)", err)
    assert m is not None, err
    k, n = int(m.group(2)), int(m.group(3))
    assert 2 <= k < n
    show = subprocess.run([sys.executable, "-m", "gpuplay", "calibrate", "--show", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    if m.group(4) != "kept in":  # every finished probe refused (a busy or a short budget): nothing stored
        assert show.returncode == 1 and "nothing calibrated" in show.stderr
        return
    assert show.returncode == 0, show.stderr
    (doc,) = json.loads(show.stdout)
    assert doc["partial"] is True and len(doc["measurements"]) + len(doc["refused"]) == k


@pytest.fixture
def numpy_only(monkeypatch):
    """A machine without torch: `import torch` fails and no torch distribution is installed."""
    from gpuplay.core.measure import roofline

    real = roofline.package_version
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(roofline, "package_version", lambda name: None if name == "torch" else real(name))


def test_calibrate_budget_bounds_the_whole_wait(numpy_only):
    """`calibrate --budget 2` took 51.9 s for 12 probes: the matmuls grew for up to 4x the budget
    each, and a last size could cost far more. The budget is now the whole calibration's; a
    generous bound (twice it, plus start-up), not a speed test."""
    budget = 1.0
    t0 = time.perf_counter()
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", str(budget), "--format", "json"])
    took = time.perf_counter() - t0
    assert res.exit_code in (0, 1), res.output  # 1: no peak reached in so short a budget (said)
    assert "[5 of 5 probes]" in res.stderr  # NumPy: copy, triad, three matmul dtypes
    assert took <= 2 * budget + 1.5, f"{took:.1f} s for a budget of {budget} s"
    said = re.search(r"calibration took ([\d.]+) s against a budget of 1 s: ([\d.]+) s measuring 5 probes",
                     " ".join(res.stderr.split()))  # fmt: skip
    assert said is not None, res.stderr
    assert float(said.group(2)) <= float(said.group(1)) <= took + 0.05


def test_a_budget_too_small_for_the_least_a_probe_needs_is_said(numpy_only):
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "0.01", "--format", "json"])
    assert res.exit_code == 1, res.output  # no peak can be reached in 0.01 s: nothing stored, said
    said = " ".join(res.stderr.split())
    assert "against a budget of 0.01 s" in said
    assert "the least each probe needs (its smallest size, timed twice) took longer than this budget" in said


def test_a_matmul_probe_stops_growing_before_a_size_that_would_overrun_its_budget():
    """A probe whose rate still rises with size (each call 4x the last, as a GPU filling up does)
    grew until a call took long enough: to n=1024 here, ~2 s for a 0.3 s share. It now stops
    before the size whose three calls would not fit in what is left."""
    from gpuplay.core.measure import roofline

    def make(n):
        def once():
            time.sleep(0.002 * (n / 64) ** 2)
            return 0.002 * (n / 64) ** 2

        return once

    t0 = time.perf_counter()
    got = roofline._matmul_peak(make, 64, 4096, 1.0, 0.3)
    took = time.perf_counter() - t0
    assert took <= 0.3 + 0.25, took
    # Stopped while its rate still rose: no peak, and said so (never stored as a roof).
    assert isinstance(got, str) and "still rising at n=" in got and int(got.split("n=")[1].split()[0]) <= 256
