"""The roofline: roof math on plain numbers, the per-device peak cache, results' roof fields."""

from __future__ import annotations

import json

import pytest

from gpuplay.core.hw.system import cpu_name
from gpuplay.core.measure import roofline
from gpuplay.core.measure.roofline import DevicePeaks, Measurement, place, ridge_point
from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeGpu,
    FakePynvml,
    install_cuda_uuids,
    install_nvml,
)


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


# -- the roof's libraries, read while the engine starts ----------------------------------------
def _calibrated_with_versions(numpy_version: str, torch_version: str | None) -> None:
    from gpuplay.core.hw.system import cpu_name
    from gpuplay.core.measure.roofline import DevicePeaks, Measurement

    fp = {"name": cpu_name(), "numpy": numpy_version, "torch": torch_version, "cores": roofline.cpu_count()}
    roofline.save_peaks(DevicePeaks("cpu", cpu_name(), fp, "2026-01-01T00:00:00+00:00", 1.0, [
        Measurement("memory", "triad", "numpy", 20.0, "3 x 128 MiB", 0.01, 5),
        Measurement("compute", "float32", "numpy", 200.0, "n=1024", 0.01, 5),
    ]))  # fmt: skip


def _result(versions: object):
    from gpuplay.core.hw.system import cpu_name
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    return RunResult(spec=RunSpec.make("matmul", {"n": 256}), status="ok", samples=[1e-3] * 5,
                     flops=2 * 256**3, bytes=3 * 4 * 256**2,
                     conditions={"device_name": cpu_name(), "versions": versions})  # fmt: skip


def test_the_roof_s_library_versions_are_read_before_the_answer_not_after(monkeypatch):
    from gpuplay.cli.output import warm_for_results
    from gpuplay.core.storage import installed

    installed.version.cache_clear()
    try:
        warm_for_results()  # a command, while its engine starts
        from importlib import metadata

        versions = {}
        for lib in roofline.LIBRARIES:
            try:
                versions[lib] = metadata.version(lib)
            except metadata.PackageNotFoundError:
                versions[lib] = None
        _calibrated_with_versions(versions["numpy"], versions["torch"])

        def read(*_a):
            raise AssertionError("read a package's metadata after the answer")

        monkeypatch.setattr(installed, "_version_field", read)
        monkeypatch.setattr(installed, "_metadata_version", read)
        roofline._cached.cache_clear()
        roof = _result({"numpy": versions["numpy"]}).to_dict()["roof"]
    finally:
        installed.version.cache_clear()
    assert roof["status"] == "ok" and roof["fraction"] > 0, roof


def test_an_older_result_is_placed_against_a_calibration_made_since(monkeypatch):
    """A result from before a NumPy upgrade (history, `load`, `compare --from`) is placed against
    the peaks measured since with the libraries installed now: the peaks describe the device
    (holding it against the versions it records made "run gpuplay calibrate" loop)."""
    _calibrated_with_versions("2.0.0", None)  # calibrated after the upgrade
    monkeypatch.setattr(roofline, "package_version", lambda name: {"numpy": "2.0.0"}.get(name))
    roofline._cached.cache_clear()
    roof = _result({"numpy": "1.26.4"}).to_dict()["roof"]  # measured before it
    assert roof["status"] == "ok" and "run gpuplay calibrate" not in roof.get("note", ""), roof


GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"


GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"


MIG_B = "MIG-cccccccc-2222-2222-2222-222222222222"


# -- a cached roof names the board, driver, power limit and MIG profile it was measured on ----------
def _calibrated_on_boards(monkeypatch, gpus, uuids):
    from gpuplay.core.measure import roofline
    from gpuplay.core.measure.roofline import DevicePeaks, Measurement

    nvml = FakePynvml(gpus)
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, uuids)
    name = "NVIDIA H100 80GB HBM3"
    roofline.save_peaks(
        DevicePeaks("cuda:0", name, roofline.fingerprint("cuda:0", name), "2026-01-01T00:00:00+00:00", 1.0,
                    [Measurement("memory", "triad", "torch", 3000.0, "3 x 1 GiB", 0.01, 5),
                     Measurement("compute", "float32", "torch", 50_000.0, "n=8192", 0.02, 5)])
    )  # fmt: skip
    return nvml


def _roof(monkeypatch):
    from gpuplay.core.result import RunResult

    # 13.7 TFLOP/s under the 50 TFLOP/s roof (a result above its roof reads stale for that reason)
    r = RunResult(RunSpec.make("matmul", {"n": 4096}, backend="torch", device="cuda:0"),
                  samples=[1e-2] * 5, flops=2 * 4096**3, bytes=3 * 4 * 4096**2, compute_dtype="float32",
                  conditions={"device_name": "NVIDIA H100 80GB HBM3"})  # fmt: skip
    return r.roof_fields()


@pytest.mark.gpu_fake
def test_a_roof_cached_on_another_board_of_the_same_name_is_stale(monkeypatch):
    from gpuplay.core.measure import roofline

    _calibrated_on_boards(monkeypatch, [FakeGpu(GPU_A, "H100"), FakeGpu(GPU_B, "H100")], [GPU_A, GPU_B])
    assert _roof(monkeypatch)["status"] == "ok"
    install_cuda_uuids(monkeypatch, [GPU_B, GPU_A])  # now cuda:0 is the other H100
    roofline._cached.cache_clear()  # a new process (the file is unchanged: lookups are memoised by mtime)
    roof = _roof(monkeypatch)
    assert roof["status"] != "ok" and "stale" in roof["note"] and "uuid" in roof["note"]


@pytest.mark.gpu_fake
@pytest.mark.parametrize(
    "change, key",
    [
        (lambda nvml: setattr(nvml.gpus[0], "power_limit_mw", 400_000), "power_limit_w 700 → 400"),
        (lambda nvml: setattr(nvml, "driver", "590.10"), "driver 580.95.05 → 590.10"),
    ],
)
def test_a_roof_is_stale_after_a_power_limit_or_driver_change(monkeypatch, change, key):
    from gpuplay.core.measure import roofline

    nvml = _calibrated_on_boards(monkeypatch, [FakeGpu(GPU_A, "H100")], [GPU_A])
    assert _roof(monkeypatch)["status"] == "ok"
    change(nvml)
    roofline._cached.cache_clear()  # the cache file is unchanged: its lookup is memoised by mtime
    roof = _roof(monkeypatch)
    assert roof["status"] != "ok" and key in roof["note"], roof


@pytest.mark.gpu_fake
def test_the_fingerprint_records_mig_profile_and_cuda_runtime(monkeypatch):
    from gpuplay.core.measure import roofline

    class MigNames(FakePynvml):
        def nvmlDeviceGetName(self, h):  # noqa: N802
            return "NVIDIA H100 80GB HBM3 MIG 1g.10gb" if h.mig is not None else "NVIDIA H100 80GB HBM3"

    install_nvml(monkeypatch, MigNames([FakeGpu(GPU_B, "H100", mig=[MIG_B])]))
    install_cuda_uuids(monkeypatch, [MIG_B])
    fp = roofline.fingerprint("cuda:0", "NVIDIA H100 80GB HBM3")
    assert fp["uuid"] == MIG_B.removeprefix("MIG-").replace("-", "") and fp["mig_profile"].endswith(
        "MIG 1g.10gb"
    )
    assert fp["power_limit_w"] == 700 and fp["driver"] == "580.95.05" and "cuda_runtime" in fp


@pytest.mark.gpu_fake
def test_gpuplay_info_says_a_cached_roof_is_stale(monkeypatch):
    from gpuplay.core.measure import roofline

    nvml = _calibrated_on_boards(monkeypatch, [FakeGpu(GPU_A, "H100")], [GPU_A])
    assert roofline.summary("cuda:0")["stale"] == ""
    nvml.gpus[0].power_limit_mw = 350_000  # a power cap since the calibration
    roofline._cached.cache_clear()
    assert "power_limit_w 700 → 350" in roofline.summary("cuda:0")["stale"]
