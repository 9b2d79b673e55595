"""The crossover sweep's parts: sizes, plan, fit, crossovers and text, without timing anything real."""

from __future__ import annotations

import json
import math
import threading

import pytest

from gpuplay.core.catalogue.scenarios import load_scenarios
from gpuplay.core.measure.sweepfit import crossing, fit_floor_rate, predicted_crossing
from gpuplay.core.reports import sweepreport
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.sweep import (
    Point,
    Series,
    Sweep,
    SweepError,
    crossover,
    parse_over,
    parse_values,
    plan_sweep,
    run_sweep,
    sweep_values,
)


# -- sizes ------------------------------------------------------------------------------------
def test_range_doubles_from_its_start_and_keeps_its_end():
    assert parse_values("32..512") == [32, 64, 128, 256, 512]
    assert parse_values("32..500") == [32, 64, 128, 256, 500]
    assert parse_values("100..1000:3") == [100, 316, 1000]
    assert parse_values("64, 32,64 ,128") == [32, 64, 128]
    assert parse_values("0.5..2", integer=False) == [0.5, 1.0, 2.0]


def test_a_range_whose_ends_agree_is_one_point():
    assert parse_values("64..64") == [64]
    assert parse_values("64..64:5") == [64]


@pytest.mark.parametrize(
    "text, words",
    [
        ("nan", "finite"),
        ("32..nan", "finite"),
        ("inf..4", "finite"),
        ("512..32", "below its start"),
        ("0..32", "positive"),
        ("32..64:1", "2 to 64"),
        ("32..64:x", "integer"),
        ("1..1e30", "at most"),
        ("abc", "number"),
        (",", "no sizes"),
    ],
)
def test_bad_sizes_are_refused_in_words(text, words):
    with pytest.raises(SweepError, match=words):
        parse_values(text)


def test_over_needs_a_name_and_values():
    assert parse_over("n = 32..64") == ("n", "32..64")
    for bad in ("n", "=32", "n="):
        with pytest.raises(SweepError, match="PARAM="):
            parse_over(bad)


@pytest.fixture(scope="module")
def matmul():
    return load_scenarios([]).get("matmul")


def test_unknown_or_non_numeric_parameter_is_refused(matmul):
    with pytest.raises(SweepError, match="no parameter 'm'.*known: n"):
        sweep_values(matmul, "m", "32..64")
    attention = load_scenarios([]).get("attention")
    with pytest.raises(SweepError, match="not a size"):
        sweep_values(attention, "sdpa", "1,2")


def test_a_size_outside_the_parameters_range_is_refused(matmul):
    with pytest.raises(SweepError, match="n must be >= 2"):
        plan_sweep(matmul, "n", [1, 4], ["numpy"], ["cpu"])


def test_plan_orders_series_and_refuses_what_cannot_run(matmul):
    sweep = plan_sweep(
        matmul, "n", [32, 64], ["numpy", "torch", "cupy"], ["cpu", "cuda"], dtypes=["float32", "float64"]
    )
    labels = [s.label for s in sweep.series]
    assert labels[:2] == ["numpy cpu float32", "numpy cpu float64"]
    assert "torch cpu float32" in labels and "torch cpu float64" in labels
    refused = dict(sweep.refused)
    # No GPU on this machine: torch cuda and cupy are refused with their reason, never run.
    assert any(label.startswith("torch cuda") for label in refused)
    assert any(label.startswith("cupy") for label in refused)
    assert all(why for why in refused.values())
    assert not any(label.startswith("numpy cuda") for label in refused)  # not asked: a GPU-less backend


# -- running, with a fake measure ------------------------------------------------------------
def _fake_measure(times, refuse_at=None):
    """A measure() whose median is times(backend, n); refused at and above `refuse_at`."""
    calls = []

    def measure(spec, cancel=None, telemetry=None):
        n = spec.params["n"]
        calls.append((spec.backend, n))
        if refuse_at and spec.backend == "torch" and n >= refuse_at:
            return RunResult(spec=spec, status="refused", message="one step is estimated at 99 s")
        t = times(spec.backend, n)
        return RunResult(spec=spec, samples=[t * 0.99, t, t * 1.01], flops=2.0 * n**3, bytes=12.0 * n * n)

    return measure, calls


def test_run_goes_smallest_first_and_stops_a_series_at_its_refusal(matmul):
    sweep = plan_sweep(matmul, "n", [32, 64, 128, 256], ["numpy", "torch"], ["cpu"])
    measure, calls = _fake_measure(lambda b, n: 1e-6 * n, refuse_at=128)
    seen = []
    run_sweep(sweep, measure, on_point=lambda s, p: seen.append((s.label, p.value, p.status)))
    assert calls == [("numpy", 32), ("torch", 32), ("numpy", 64), ("torch", 64), ("numpy", 128),
                     ("torch", 128), ("numpy", 256)]  # fmt: skip
    torch = sweep.series[1]
    assert torch.stopped.startswith("stopped at n=128: one step is estimated")
    assert [p.status for p in torch.points] == ["ok", "ok", "refused"]
    assert seen[-1] == ("numpy cpu float32", 256, "ok")


def test_a_cancel_keeps_the_finished_points_and_drops_the_interrupted_one(matmul):
    sweep = plan_sweep(matmul, "n", [32, 64, 128], ["numpy"], ["cpu"])
    cancel = threading.Event()
    inner, _ = _fake_measure(lambda b, n: 1e-6)

    def measure(spec, cancel=None, telemetry=None):
        if spec.params["n"] == 64:
            cancel.set()
            return RunResult(spec=spec, status="cancelled", samples=[1e-6])
        return inner(spec)

    run_sweep(sweep, measure, cancel=cancel)
    assert sweep.interrupted and [p.value for p in sweep.series[0].points] == [32]


# -- the fit ------------------------------------------------------------------------------------
def test_fit_recovers_floor_and_rate_from_synthetic_times():
    works = [2.0 * n**3 for n in (32, 64, 128, 256, 512, 1024)]
    floor, rate = 20e-6, 50e9
    times = [floor + w / rate for w in works]
    fit = fit_floor_rate(works, times, "GFLOP/s")
    assert fit is not None
    assert fit.floor_s == pytest.approx(floor, rel=1e-6)
    assert fit.rate == pytest.approx(rate, rel=1e-6)
    assert fit.rms_rel < 1e-9
    # 5% multiplicative noise: still close, because residuals are relative.
    noisy = [t * (1.05 if i % 2 else 0.95) for i, t in enumerate(times)]
    fit = fit_floor_rate(works, noisy, "GFLOP/s")
    assert fit.floor_s == pytest.approx(floor, rel=0.15)
    assert fit.rate == pytest.approx(rate, rel=0.15)


def test_fit_keeps_the_floor_non_negative_and_says_when_time_did_not_grow():
    works = [1e6, 1e7, 1e8]
    fit = fit_floor_rate(works, [w / 1e9 * 1.0 for w in works], "GFLOP/s")
    assert fit.floor_s >= 0 and fit.rate == pytest.approx(1e9, rel=1e-6)
    flat = fit_floor_rate(works, [3e-6, 3e-6, 3e-6], "GFLOP/s")
    assert flat.rate is None and flat.floor_s == pytest.approx(3e-6)
    # a line through these would cross zero time above zero work: the floor is clamped, not negative
    clamped = fit_floor_rate(works, [0.5e-6, 1e-5, 1e-4], "GFLOP/s")
    assert clamped.floor_s == 0.0 and clamped.rate > 0
    # times that fall as the work grows: no rate, the floor is their (1/t²-weighted) mean
    falling = [5e-6, 4e-6, 3e-6]
    fit = fit_floor_rate(works, falling, "GFLOP/s")
    assert fit.rate is None
    assert fit.floor_s == pytest.approx(sum(1 / t for t in falling) / sum(1 / t**2 for t in falling))
    assert fit_floor_rate([1.0], [1.0], "GB/s") is None
    assert fit_floor_rate([1.0, 2.0], [math.nan, 1.0], "GB/s") is None


# -- crossovers ----------------------------------------------------------------------------------
def test_crossing_is_interpolated_in_log_log():
    xs = [100.0, 1000.0]
    # a is 10× slower at 100 and 10× faster at 1000: equal at the geometric middle.
    at, changes = crossing(xs, [10.0, 1.0], [1.0, 10.0])
    assert at == pytest.approx(math.sqrt(100 * 1000)) and changes == 1
    assert crossing(xs, [1.0, 1.0], [2.0, 2.0]) == (None, 0)
    at, changes = crossing([1.0, 2.0, 4.0, 8.0], [2.0, 0.5, 2.0, 0.5], [1.0, 1.0, 1.0, 1.0])
    assert changes == 3 and 4 < at < 8  # the last crossing is the one that holds


def test_predicted_crossing_of_two_models():
    at = predicted_crossing(1, 1e4, lambda x: 1e-3 + x * 1e-9, lambda x: 1e-6 + x * 1e-7)
    # equal where 1e-3 + 1e-9 x = 1e-6 + 1e-7 x: x = 999e-6 / 99e-9 ≈ 10091 (outside): none
    assert at is None
    at = predicted_crossing(1, 1e5, lambda x: 1e-3 + x * 1e-9, lambda x: 1e-6 + x * 1e-7)
    assert at == pytest.approx(999e-6 / 99e-9, rel=0.02)


def _series(backend, medians, floor=None):
    spec = RunSpec.make("matmul", {"n": 32}, scenario="matmul", backend=backend)
    s = Series(spec)
    for n, t in medians.items():
        r = RunResult(spec=spec.replace(params={"n": n}), samples=[t], flops=2.0 * n**3, bytes=12.0 * n * n)
        s.points.append(Point(n, "ok", r))
    return s


def test_crossover_measured_and_predicted_beside_each_other():
    ns = [32, 64, 128, 256, 512]
    gpu = _series("torch", {n: 50e-6 + 2 * n**3 / 1e12 for n in ns})  # high floor, fast
    cpu = _series("numpy", {n: 1e-6 + 2 * n**3 / 20e9 for n in ns})  # low floor, slow
    c = crossover("n", gpu, cpu)
    assert c["faster"] == "torch cpu float32" and c["slower"] == "numpy cpu float32"
    assert 64 < c["at"] < 128 and "faster from n≈" in c["reason"]
    # solve 50e-6 + 2n³/1e12 = 1e-6 + 2n³/20e9 for n: the model's own crossing
    exact = (49e-6 / (2 / 20e9 - 2 / 1e12)) ** (1 / 3)
    assert c["predicted"] == pytest.approx(exact, rel=0.05)


def test_no_crossover_is_null_with_a_reason():
    ns = [32, 64, 128, 256, 512]
    slow = _series("torch", {n: 2e-6 * n for n in ns})
    fast = _series("numpy", {n: 1e-6 * n for n in ns})
    c = crossover("n", slow, fast)
    assert c["at"] is None
    assert c["reason"] == "torch cpu float32 never faster over n=32–512"
    c = crossover("n", _series("torch", {32: 1e-6}), fast)
    assert c["at"] is None and "too few sizes" in c["reason"]


def test_sweep_dict_has_the_issue_shape_and_renders(matmul):
    sweep = Sweep("matmul", "matmul", "n", [32, 64, 128], [
        _series("numpy", {32: 2e-6, 64: 1e-5, 128: 8e-5}),
        _series("torch", {32: 9e-6, 64: 1.2e-5, 128: 3e-5}),
    ])  # fmt: skip
    doc = sweepreport.document(sweep.to_dict(), {"cpu": "test cpu", "cores": 2})
    text = sweepreport.to_json(doc)
    d = json.loads(text)["sweep"]
    assert {"scenario", "param", "values", "series", "crossovers"} <= set(d)
    point = d["series"][0]["points"][0]
    assert {"value", "median", "low", "high", "gflops", "roof_fraction", "status"} <= set(point)
    assert {"floor_s", "rate", "unit"} <= set(d["series"][0]["fit"])
    assert [set(c) >= {"faster", "slower", "at", "reason"} for c in d["crossovers"]] == [True]
    md = sweepreport.to_markdown(d, {"cpu": "a | b", "cores": 2})
    assert "| n | numpy cpu float32 | torch cpu float32 |" in md and "a \\| b" in md
    rows = sweepreport.to_csv(d).splitlines()
    assert len(rows) == 1 + 6 and rows[0].startswith("scenario,param,series")


def test_merge_prefixes_each_files_series_and_refuses_another_axis():
    a = {"sweep": {"scenario": "matmul", "param": "n", "values": [32, 64], "series": [{"label": "x"}]}}
    b = {"sweep": {"scenario": "matmul", "param": "n", "values": [64, 128], "series": [{"label": "x"}]}}
    merged = sweepreport.merge_sweeps([a, b], ["box1", "box2"])
    assert [s["label"] for s in merged["series"]] == ["box1: x", "box2: x"]
    assert merged["values"] == [32, 64, 128]
    c = {"sweep": {"scenario": "fft2d", "param": "n", "values": [32], "series": []}}
    with pytest.raises(sweepreport.SweepFileError, match="one axis per table"):
        sweepreport.merge_sweeps([a, c], ["box1", "box3"])
