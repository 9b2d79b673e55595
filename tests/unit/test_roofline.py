"""The roofline: roof math on plain numbers, the per-device peak cache, results' roof fields."""

from __future__ import annotations

import json

import pytest

from gpuplay.core.hw.system import cpu_name
from gpuplay.core.measure import roofline
from gpuplay.core.measure.roofline import DevicePeaks, Measurement, place, ridge_point
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec


# -- the math ---------------------------------------------------------------------------
def test_ridge_point_is_peak_over_bandwidth():
    assert ridge_point(200.0, 20.0) == 10.0


def test_below_the_ridge_is_memory_bound_and_measured_against_the_slope():
    # 1 GFLOP over 1 GB in 0.1 s: intensity 1, 10 GFLOP/s; the slope allows 1 x 20 = 20 GFLOP/s.
    p = place(1e9, 1e9, 0.1, peak_gflops=200.0, bandwidth_gbs=20.0)
    assert p is not None
    assert p.intensity == 1.0 and p.bound == "memory" and p.ridge == 10.0
    assert p.roof_gflops == pytest.approx(20.0)
    assert p.fraction == pytest.approx(0.5)
    assert p.achieved_gbs == pytest.approx(10.0)


def test_above_the_ridge_is_compute_bound_and_measured_against_the_peak():
    # intensity 100 > ridge 10: 100 GFLOP in 1 s against a 200 GFLOP/s roof.
    p = place(100e9, 1e9, 1.0, peak_gflops=200.0, bandwidth_gbs=20.0)
    assert p is not None and p.bound == "compute"
    assert p.roof_gflops == 200.0 and p.fraction == pytest.approx(0.5)


def test_at_the_ridge_both_roofs_agree():
    p = place(10e9, 1e9, 1.0, peak_gflops=200.0, bandwidth_gbs=20.0)
    assert p is not None and p.bound == "compute" and p.roof_gflops == pytest.approx(200.0)


def test_no_flops_or_no_compute_peak_uses_the_memory_roof_only():
    copy = place(0.0, 2e9, 0.1, peak_gflops=200.0, bandwidth_gbs=40.0)
    assert copy is not None and copy.bound == "memory" and copy.achieved_gflops is None
    assert copy.fraction == pytest.approx(0.5)  # 20 GB/s of 40
    no_peak = place(1e9, 1e9, 0.1, peak_gflops=None, bandwidth_gbs=20.0)
    assert no_peak is not None and no_peak.roof_gflops is None and no_peak.fraction == pytest.approx(0.5)


def test_nothing_to_place_without_bytes_or_time():
    assert place(1e9, 0.0, 0.1, 200.0, 20.0) is None
    assert place(1e9, 1e9, 0.0, 200.0, 20.0) is None


def test_tf32_roof_only_for_float32_on_cuda():
    assert roofline.peak_dtype("cuda:0", "float32", tf32=True) == "tf32"
    assert roofline.peak_dtype("cuda", "bfloat16", tf32=True) == "bfloat16"
    assert roofline.peak_dtype("cpu", "float32", tf32=True) == "float32"


# -- the cache --------------------------------------------------------------------------
def peaks(device: str = "cpu", name: str | None = None, bw: float = 20.0, f32: float = 200.0) -> DevicePeaks:
    name = name or (cpu_name() if device == "cpu" else "NVIDIA Test GPU")
    return DevicePeaks(
        device=device,
        name=name,
        fingerprint=roofline.fingerprint(device, name),
        measured_at="2026-01-01T00:00:00+00:00",
        calibration_s=1.0,
        measurements=[
            Measurement("memory", "copy", "numpy", bw / 2, "3 x 128 MiB", 0.01, 5),
            Measurement("memory", "triad", "torch", bw, "3 x 128 MiB", 0.01, 5),
            Measurement("compute", "float32", "numpy", f32, "n=1024", 0.01, 5),
            Measurement("compute", "float32", "torch", f32 / 2, "n=1024", 0.02, 5),
            Measurement("compute", "float16", "torch", 1.0, "n=256", 0.03, 3),
        ],
    )


def test_cache_round_trip_per_device(tmp_path):
    roofline.save_peaks(peaks("cpu", bw=20.0))
    roofline.save_peaks(peaks("cuda:0", bw=2000.0, f32=50_000.0))
    cpu = roofline.load_peaks("cpu").peaks
    gpu = roofline.load_peaks("cuda").peaks  # "cuda" means cuda:0
    assert cpu is not None and gpu is not None
    assert roofline.cache_path("cpu").parent == tmp_path / "state" / "roofline"
    assert cpu.bandwidth().value == 20.0 and cpu.bandwidth().name == "triad"  # the best kernel
    assert cpu.compute("float32").value == 200.0 and cpu.compute("float32").library == "numpy"
    assert gpu.bandwidth().value == 2000.0
    assert roofline.load_peaks("cuda:1").problem == roofline.NOT_CALIBRATED


def test_invalidate_forgets_one_device_only():
    roofline.save_peaks(peaks("cpu"))
    roofline.save_peaks(peaks("cuda:0"))
    assert roofline.invalidate("cuda:0") is True
    assert roofline.load_peaks("cuda:0").peaks is None
    assert roofline.load_peaks("cpu").peaks is not None
    assert roofline.invalidate("cuda:0") is False


def test_rewritten_cache_is_read_again():
    roofline.save_peaks(peaks("cpu", bw=20.0))
    assert roofline.load_peaks("cpu").peaks.bandwidth().value == 20.0
    roofline.save_peaks(peaks("cpu", bw=30.0))
    assert roofline.load_peaks("cpu").peaks.bandwidth().value == 30.0


@pytest.mark.parametrize("text", ["{not json", '{"device": "cpu"}', "[]", ""])
def test_corrupt_cache_is_a_clear_problem_not_a_crash(text):
    path = roofline.cache_path("cpu")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    lookup = roofline.load_peaks("cpu")
    assert lookup.peaks is None
    assert str(path) in lookup.problem and "run gpuplay calibrate" in lookup.problem


def test_peaks_of_another_device_or_library_are_stale():
    roofline.save_peaks(peaks("cpu"))
    assert roofline.load_peaks("cpu", cpu_name()).peaks is not None
    stale = roofline.load_peaks("cpu", "Some Other CPU")
    assert stale.peaks is None and "stale" in stale.problem and "Some Other CPU" in stale.problem
    p = peaks("cpu")
    p.fingerprint["torch"] = "1.0.0"
    roofline.save_peaks(p)
    stale = roofline.load_peaks("cpu", cpu_name())
    assert stale.peaks is None and "torch 1.0.0" in stale.problem


# -- results ----------------------------------------------------------------------------
def result(**kw) -> RunResult:
    spec = RunSpec.make("matmul", {"n": 64}, **kw)
    r = RunResult(spec=spec, samples=[0.1, 0.1, 0.1], flops=100e9, bytes=1e9, compute_dtype=spec.dtype)
    r.conditions = {"device_name": cpu_name()}
    return r


def test_result_without_calibration_says_so_and_keeps_its_intensity():
    d = result().to_dict()
    assert d["roof"]["status"] == "not calibrated"
    assert d["roof"]["note"] == "not calibrated: run gpuplay calibrate"
    assert d["roof"]["intensity_flop_per_byte"] == 100.0


def test_result_roof_fields_against_cached_peaks_survive_json():
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=2000.0))
    d = json.loads(json.dumps(result().to_dict()))
    roof = d["roof"]
    # 100 GFLOP in 0.1 s = 1000 GFLOP/s; intensity 100 > ridge 100 -> compute, half the roof.
    assert roof["status"] == "ok" and roof["bound"] == "compute"
    assert roof["ridge_flop_per_byte"] == pytest.approx(100.0)
    assert roof["fraction"] == pytest.approx(0.5)
    assert roof["peak_dtype"] == "float32" and roof["peak_source"] == "numpy matmul n=1024"
    back = RunResult.from_dict(d)
    roofline.invalidate("cpu")  # a result read back keeps the roof it was measured against
    assert back.roof_fields()["fraction"] == pytest.approx(0.5)


def test_result_above_its_roof_reads_stale_and_asks_for_a_new_calibration():
    roofline.save_peaks(peaks("cpu", bw=20.0, f32=500.0))
    roof = result().roof_fields()
    assert roof["status"] == "stale" and roof["fraction"] is None
    assert roof["above_roof"] == pytest.approx(2.0)
    assert "rerun gpuplay calibrate" in roof["note"]


def test_dtype_without_a_peak_falls_back_to_the_memory_roof():
    roofline.save_peaks(peaks("cpu"))
    roof = result(dtype="float64").roof_fields()
    assert roof["status"] == "ok" and roof["bound"] == "memory" and "no float64 compute peak" in roof["note"]


@pytest.mark.slow
def test_real_cpu_calibration_measures_every_dtype_and_caches_it(monkeypatch):
    from gpuplay.core.measure import noise

    monkeypatch.setattr(noise, "host_warnings", lambda host, during="": [])  # a shared test machine
    p = roofline.calibrate("cpu", budget_s=8.0)
    got = {(m.kind, m.library, m.name) for m in p.measurements} | {
        (r["kind"], r["library"], r["name"]) for r in p.refused
    }
    for lib in ("numpy", "torch"):
        assert {("memory", lib, "copy"), ("memory", lib, "triad")} <= got
    for dtype in ("float64", "float32", "bfloat16", "float16"):
        assert ("compute", "torch", dtype) in got  # measured, or refused with its reason
    assert all(m.value > 0 and m.best_s > 0 and m.repeats >= 2 for m in p.measurements)
    assert all(r["reason"] == "budget" and r["why"] for r in p.refused)
    cached = roofline.load_peaks("cpu", cpu_name()).peaks
    assert cached is not None and cached.measured_at == p.measured_at
    assert "other_cores" in cached.noise


def test_a_calibration_that_measures_nothing_leaves_the_cache_alone():
    roofline.save_peaks(peaks("cpu"))
    before = roofline.cache_path("cpu").read_text()
    with pytest.raises(roofline.NothingMeasured) as info:
        roofline.calibrate("cpu", budget_s=0.0)
    assert info.value.peaks.refused and not info.value.peaks.measurements
    assert roofline.cache_path("cpu").read_text() == before
