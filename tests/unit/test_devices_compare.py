"""Outlier detection, device lists and the side-by-side grouping, on plain data."""

from __future__ import annotations

import threading

import pytest

from gpuplay.core.reports.devices_compare import (
    DevicesError,
    find_outliers,
    health_text,
    resolve_devices,
    run_devices,
    side_by_side,
    throttle_reasons,
)
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec


def test_no_outlier_within_five_percent():
    assert find_outliers({"cuda:0": 1.00, "cuda:1": 1.02, "cuda:2": 0.99, "cuda:3": 1.04}) == {}


def test_one_sick_gpu_among_eight():
    meds = {f"cuda:{i}": 10.0 + 0.05 * i for i in range(8)}
    meds["cuda:5"] = 12.0
    out = find_outliers(meds)
    assert list(out) == ["cuda:5"]
    peers = sorted(v for k, v in meds.items() if k != "cuda:5")
    assert len(peers) == 7 and out["cuda:5"] == pytest.approx(12.0 / peers[3] - 1)


def test_threshold_is_strictly_more_than_five_percent():
    assert find_outliers({"a": 1.0, "b": 1.05}) == {}  # exactly 5 % is not flagged
    assert list(find_outliers({"a": 1.0, "b": 1.0501})) == ["b"]
    assert list(find_outliers({"a": 1.0, "b": 1.2}, threshold=0.25)) == []


def test_two_devices_only_the_slower_is_flagged_and_missing_figures_ignored():
    assert list(find_outliers({"cuda:0": 1.0, "cuda:1": 2.0, "cuda:2": None})) == ["cuda:1"]
    assert find_outliers({"cuda:0": 1.0}) == {}  # no peers, nothing to say
    assert find_outliers({}) == {}


def test_faster_gpu_is_not_an_outlier():
    assert find_outliers({"a": 1.0, "b": 1.0, "c": 0.5}) == {}  # upper median of two peers
    assert list(find_outliers({"a": 1.0, "b": 1.0, "c": 0.5, "d": 1.2})) == ["d"]


def test_throttle_reasons_decoded():
    assert throttle_reasons(0) == ["none"]
    assert throttle_reasons(None) == ["n/a"]
    assert throttle_reasons(0x4 | 0x40) == ["software power cap", "hardware thermal slowdown"]
    assert throttle_reasons(0x1000) == ["other (0x1000)"]


def test_resolve_devices():
    cuda = ["cuda:0", "cuda:1"]
    assert resolve_devices("all", cuda) == cuda
    assert resolve_devices("1,cuda:0,1", cuda) == ["cuda:1", "cuda:0"]
    assert resolve_devices("cpu", []) == ["cpu"]
    with pytest.raises(
        DevicesError, match=r"--devices all found no CUDA device \(CPU-only build\); use --devices cpu"
    ):
        resolve_devices("all", [], "CPU-only build")
    with pytest.raises(DevicesError, match="no device 'cuda:7' here; CUDA devices: cuda:0, cuda:1"):
        resolve_devices("cuda:7", cuda)
    with pytest.raises(DevicesError, match="no device given"):
        resolve_devices(" ,", cuda)


def _result(device: str, median: float) -> RunResult:
    spec = RunSpec.make("matmul", {"n": 64}, scenario="matmul", backend="torch", device=device)
    return RunResult(spec, samples=[median * 0.99, median, median * 1.01], size="64×64")


def test_side_by_side_groups_the_same_configuration_across_devices():
    results = [
        _result("cuda:0", 1.0),
        _result("cuda:1", 1.01),
        _result("cuda:2", 1.3),
        _result("cuda:3", 0.98),
    ]
    rows = side_by_side(results)
    assert len(rows) == 1
    row = rows[0]
    assert row.config == "torch float32" and set(row.results) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    assert list(row.outliers) == ["cuda:2"]


def test_run_devices_keeps_spec_order_concurrent_or_not():
    specs = [RunSpec.make("matmul", {"n": 8 + i}, backend="torch", device=f"cuda:{i % 2}") for i in range(6)]
    seen_threads: set[str] = set()

    def fake(spec, cancel):
        seen_threads.add(threading.current_thread().name)
        return RunResult(spec, samples=[1.0])

    for concurrent in (False, True):
        seen_threads.clear()
        out = run_devices(specs, concurrent=concurrent, measure_fn=fake)
        assert [r.spec for r in out] == specs
        assert len(seen_threads) == (2 if concurrent else 1)


def test_concurrent_runs_in_lockstep():
    """Each configuration runs on all devices at once; the next starts only when all finished."""
    import time

    specs = [
        RunSpec.make("matmul", {"n": n}, backend="torch", device=d)
        for n in (8, 16)
        for d in ("cuda:0", "cuda:1")
    ]
    log = []

    def fake(spec, cancel):
        log.append(("start", spec.params["n"]))
        time.sleep(0.05 if spec.device == "cuda:0" else 0.01)
        log.append(("end", spec.params["n"]))
        return RunResult(spec, samples=[1.0])

    run_devices(specs, concurrent=True, measure_fn=fake)
    first_16 = log.index(("start", 16))
    assert log[:first_16].count(("end", 8)) == 2  # both n=8 runs ended before any n=16 run began
    assert log[:2] == [("start", 8), ("start", 8)]  # and the two n=8 runs overlapped


def test_health_text_without_nvml():
    assert health_text({"device": "cuda:0", "note": "NVML unavailable: x"}) == "cuda:0: NVML unavailable: x"
    text = health_text({"device": "cuda:1", "name": "H100", "sm_clock_mhz": 1200, "sm_clock_max_mhz": 1980,
                        "mem_clock_mhz": 2619, "temp_c": 87, "power_w": 690.0, "power_limit_w": 700.0,
                        "throttle": ["hardware thermal slowdown"], "pcie_gen": 4, "pcie_width": 8,
                        "pcie_gen_max": 5, "pcie_width_max": 16})  # fmt: skip
    assert "SM 1200/1980 MHz" in text and "87 °C" in text and "hardware thermal slowdown" in text
    assert "PCIe gen4 x8 (max gen5 x16)" in text
