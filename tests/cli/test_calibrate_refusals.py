"""`gpuplay calibrate` stores only peaks it measured: a share of the budget too short to reach a
peak, or a machine busy during a probe, is refused and said (which, and why), never stored as a roof."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpuplay.cli import main
from gpuplay.core.measure import noise, roofline
from tests.unit.test_roofline import peaks


def _quiet(monkeypatch):
    """The machine as a quiet one reads (this test machine is shared: its load is not the subject)."""
    monkeypatch.setattr(noise, "host_warnings", lambda host, during="": [])


def _busy(monkeypatch):
    """Every probe's window as a machine with 1.5 other cores busy reads."""
    real = noise.host_noise

    def busy(a, b, own_pids=()):
        got = real(a, b, own_pids)
        window = max(got.get("window_s", 0.0), 0.5)
        return {**got, "window_s": window, "cores": 2, "other_cores": 1.5, "other_listed": True,
                "other_top": [{"name": "burner", "pid": 4242, "cores": 1.5}]}  # fmt: skip

    monkeypatch.setattr(noise, "host_noise", busy)


def test_a_budget_too_short_stores_nothing_and_says_so(monkeypatch):
    _quiet(monkeypatch)
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=200.0))
    before = roofline.cache_path("cpu").read_text()
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "0.01"])
    assert res.exit_code == 1, res.output
    assert "not stored: budget too short" in res.output
    assert "stored nothing" in res.output and "the budget was too short" in res.output
    assert roofline.cache_path("cpu").read_text() == before  # the older roofs are left as they were


def test_a_busy_machine_stores_nothing_and_names_what_ran(monkeypatch):
    _busy(monkeypatch)
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "2"])
    assert res.exit_code == 1, res.output
    out = " ".join(res.output.split())
    assert "not stored: machine busy" in out and "burner (pid 4242)" in out and "the machine was busy" in out
    assert roofline.load_peaks("cpu").peaks is None
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "0.5", "--format", "json"])
    (doc,) = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["stored"] is False and not doc["measurements"]
    assert {r["reason"] for r in doc["refused"]} <= {"busy", "budget"} and len(doc["refused"]) >= 5


def test_a_peak_refused_is_said_where_a_run_looks_for_it():
    """A stored calibration whose float32 matmul was refused: a run reads the memory roof only and why."""
    p = peaks("cpu", bw=1e6, f32=1e9)
    p.measurements = [m for m in p.measurements if m.kind == "memory"]
    p.refused = [{"kind": "compute", "name": "float32", "library": "numpy", "reason": "busy",
                  "why": "machine busy: other processes used 1.5 cores"}]  # fmt: skip
    roofline.save_peaks(p)
    res = CliRunner().invoke(main, ["run", "matmul", "-s", "n=64", "--budget", "0.05", "--format", "json"])
    (r,) = json.loads(res.stdout)["results"]
    assert r["roof"]["status"] == "ok" and r["roof"]["bound"] == "memory"
    assert "no float32 compute peak measured on cpu (not stored: the machine was busy)" in r["roof"]["note"]
    show = CliRunner().invoke(main, ["calibrate", "--show"])
    assert "not stored" in show.stdout and "machine busy" in " ".join(show.stdout.split())


def test_a_rate_still_rising_when_the_budget_ends_is_no_peak():
    """The growth of a matmul stopped by the budget while its rate still rose: refused, not a roof."""
    import time

    def make(n):
        return lambda: (time.sleep(3e-3), 1e-4 * (64 / n) ** 2)[1]  # the rate grows with n

    got = roofline._matmul_peak(make, 64, 4096, 1.0, 0.01)
    assert isinstance(got, str) and "still rising" in got
    flat = roofline._matmul_peak(lambda n: lambda: 3e-3 * (n / 64) ** 3, 64, 4096, 1.0, 0.05)
    assert not isinstance(flat, str)  # a rate that no longer rises is the peak


@pytest.mark.long(35)
@pytest.mark.slow
def test_thirty_seconds_on_a_quiet_machine_store_the_copy_bandwidth_and_float32_peak(monkeypatch):
    _quiet(monkeypatch)
    res = CliRunner().invoke(main, ["calibrate", "-d", "cpu", "--budget", "30", "--format", "json"])
    assert res.exit_code == 0, res.output
    (doc,) = json.loads(res.stdout)
    got = {(m["kind"], m["name"]) for m in doc["measurements"]}
    assert ("memory", "copy") in got and ("compute", "float32") in got, doc["refused"]
    cached = roofline.load_peaks("cpu").peaks
    assert cached is not None and cached.bandwidth() is not None and cached.compute("float32") is not None
