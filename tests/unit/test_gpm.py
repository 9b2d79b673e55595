"""NVML GPM counters on a CPU machine: the metrics, the run window and each refusal,
through a fake nvidia-ml-py with two GPUs (one Hopper, one Ampere) and a MIG instance."""

from __future__ import annotations

import csv
import io
import threading
import time

import pytest

from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeGpu,
    FakePynvml,
    install_cuda_uuids,
    install_nvml,
)

pytestmark = pytest.mark.gpu_fake

H100 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
A100 = "GPU-bbbbbbbb-1111-1111-1111-111111111111"
MIG = "MIG-cccccccc-2222-2222-2222-222222222222"
F = FakePynvml
# What a bf16 matmul does on a Hopper: SMs and tensor cores busy, DRAM moderate, no NVLink traffic.
MATMUL = {
    F.NVML_GPM_METRIC_SM_UTIL: 93.0,
    F.NVML_GPM_METRIC_SM_OCCUPANCY: 41.0,
    F.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 71.0,
    F.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 70.0,
    F.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: 1.0,
    F.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: 0.5,
    F.NVML_GPM_METRIC_DRAM_BW_UTIL: 12.0,
    F.NVML_GPM_METRIC_PCIE_TX_PER_SEC: 30.0,
    F.NVML_GPM_METRIC_PCIE_RX_PER_SEC: 40.0,
}


def _two_gpus(monkeypatch, cuda_order, **kw):
    """NVML sees the H100 (GPM, no NVLink: a PCIe card) then the A100; CUDA in `cuda_order`."""
    fake = FakePynvml(
        [
            FakeGpu(H100, "NVIDIA H100 PCIe", gpm_absent=(F.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
                                                          F.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC)),
            FakeGpu(A100, "NVIDIA A100-SXM4-80GB", arch="ampere", **kw),
        ]
    )  # fmt: skip
    install_nvml(monkeypatch, fake)
    install_cuda_uuids(monkeypatch, cuda_order)
    return fake


def test_gpm_metrics_are_averaged_over_the_timed_window_only(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    fake = _two_gpus(monkeypatch, [A100, H100])  # cuda:1 is the H100 (NVML's index 0)
    fake.work(0, 30.0, {F.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.0, F.NVML_GPM_METRIC_DRAM_BW_UTIL: 90.0})
    tele = RunTelemetry()
    token = tele.begin("cuda:1")
    fake.work(0, 2.0, MATMUL)  # the timed steps
    out = tele.end(token)
    fake.work(0, 30.0, {F.NVML_GPM_METRIC_DRAM_BW_UTIL: 90.0})  # after the window: not counted
    a = out["gpu"]["activity"]
    assert out["gpu"]["name"] == "NVIDIA H100 PCIe"
    assert a["tensor_active"] == 71.0 and a["hmma_active"] == 70.0 and a["imma_active"] == 1.0
    assert a["dmma_active"] == 0.5 and a["sm_active"] == 93.0 and a["sm_occupancy"] == 41.0
    assert a["dram_active"] == 12.0 and a["pcie_tx_mibs"] == 30.0 and a["pcie_rx_mibs"] == 40.0
    assert a["nvlink_tx_mibs"] is None and a["nvlink_rx_mibs"] is None  # a PCIe card: n/a, not 0
    assert a["source"] == "NVML GPM"
    assert fake.gpm_live == set()  # both sample buffers freed


def test_gpm_is_never_sampled_inside_the_timed_loop(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    fake = _two_gpus(monkeypatch, [H100])
    tele = RunTelemetry()  # as the engine makes it, with its own 0.1 s NVML sampling thread
    token = tele.begin("cuda:0")
    t0 = time.monotonic()
    fake.work(0, 1.0, MATMUL)
    deadline = t0 + 20  # the timed loop, until the utilisation thread has sampled in it twice
    while (
        fake.calls_between(t0, time.monotonic(), "nvmlDeviceGetUtilizationRates") < 2
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    t1 = time.monotonic()
    out = tele.end(token)
    assert out["gpu"]["samples_during"] >= 2  # the utilisation sampler did run meanwhile
    for call in ("nvmlGpmSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleAlloc", "nvmlGpmQueryDeviceSupport"):
        assert fake.calls_between(t0, t1, call) == 0, call
    assert len([c for _, c in fake.calls if c == "nvmlGpmSampleGet"]) == 2  # one each side


def test_gpm_refuses_a_pre_hopper_gpu_with_the_reason(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry, gpm_status

    fake = _two_gpus(monkeypatch, [A100, H100])
    tele = RunTelemetry()
    token = tele.begin("cuda:0")
    fake.work(1, 1.0, MATMUL)
    out = tele.end(token)
    reason = out["gpu"]["activity"]["reason"]
    assert "NVIDIA A100-SXM4-80GB has no GPM counters" in reason and "Hopper" in reason
    gpu = out["gpu"]  # NVML's utilisation still comes (kept apart as NVML's own over a short window)
    assert (
        gpu["util_mean_percent"] if gpu["util_mean_percent"] is not None else gpu["util_nvml_percent"]
    ) == 50.0
    assert gpm_status(1) == reason and gpm_status(0) == ""
    assert fake.gpm_live == set()


def test_gpm_on_a_mig_instance_reads_the_instance_or_says_why_not(monkeypatch):
    from gpuplay.core.measure.telemetry import RunTelemetry

    for per_instance in (True, False):
        fake = FakePynvml([FakeGpu(H100, "NVIDIA H100 80GB HBM3", mig=[MIG], gpm_mig=per_instance)])
        install_nvml(monkeypatch, fake)
        install_cuda_uuids(monkeypatch, [MIG])
        tele = RunTelemetry()
        token = tele.begin("cuda:0")
        fake.work(0, 1.0, {F.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 5.0})  # another instance's work
        fake.work(0, 1.0, {F.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 80.0}, mig=0)  # this instance's
        a = tele.end(token)["gpu"]["activity"]
        if per_instance:
            assert a["tensor_active"] == 80.0 / 2  # the instance's counters only, over 2 s
        else:
            assert "no GPM sample for this MIG instance" in a["reason"]
        assert fake.gpm_live == set()


def test_gpm_refuses_when_the_driver_lacks_it_or_nvml_is_missing(monkeypatch):
    from gpuplay.core.measure import telemetry

    fake = FakePynvml([FakeGpu(H100, "NVIDIA H100 PCIe")], gpm_driver=False)
    install_nvml(monkeypatch, fake)
    install_cuda_uuids(monkeypatch, [H100])
    tele = telemetry.RunTelemetry()
    out = tele.end(tele.begin("cuda:0"))
    assert "driver's NVML has no GPM" in out["gpu"]["activity"]["reason"]
    assert "R520" in telemetry.gpm_status(0)
    state = telemetry._NVML()
    state._tried, state._error = True, "NVML unavailable: nvidia-ml-py is not installed"
    monkeypatch.setattr(telemetry, "nvml", state)
    assert telemetry.gpm_status(0) == "GPM n/a: NVML unavailable: nvidia-ml-py is not installed"


def test_gpm_stream_for_the_telemetry_tab_samples_only_while_wanted(monkeypatch):
    from gpuplay.core.measure.telemetry import Sampler

    fake = _two_gpus(monkeypatch, [H100, A100])
    sampler = Sampler(interval=1.0)
    assert all(g.activity is None for g in sampler.take().gpus)
    assert not any(c.startswith("nvmlGpm") for _, c in fake.calls)  # no view asked: no GPM at all
    sampler.activity = True  # the Telemetry tab is on screen
    first = sampler.take()
    assert "first sample" in first.gpus[0].activity["reason"]
    fake.work(0, 0.5, MATMUL)
    hopper, ampere = sampler.take().gpus
    assert hopper.activity["tensor_active"] == 71.0 and hopper.activity["dram_active"] == 12.0
    assert "has no GPM counters" in ampere.activity["reason"]
    assert len(fake.gpm_live) == 1  # the open window's sample, kept for the next reading
    sampler.activity = False  # the tab left the screen
    assert fake.gpm_live == set()


def test_gpm_figures_reach_the_result_conditions_report_and_csv(monkeypatch):

    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.reports.report import row_cells, to_csv, to_json
    from gpuplay.core.runner import run
    from gpuplay.core.studies.compare import Row

    fake = _two_gpus(monkeypatch, [H100])
    fake.busy(0, MATMUL)

    class OnTheFakeGpu(RunTelemetry):
        """A CPU run's timed window bracketed as if on cuda:0, so the runner's real path stores it."""

        def begin(self, device):
            return super().begin("cuda:0")

    # Timed by budget for 0.3 s: GPM's two samples must lie over 100 ms apart (NVML's refresh).
    spec = RunSpec.make("matmul", {"n": 32}, budget_s=0.3, warmup=1, threads=1)
    r = run(spec, telemetry=OnTheFakeGpu())
    assert r.status == "ok", r.message
    assert r.telemetry["gpu"]["activity"]["tensor_active"] == pytest.approx(71.0)
    assert r.conditions["gpu_activity"] == "tensor cores 71 % · SM 93 % · DRAM 12 % (GPM, timed steps)"
    row = Row(r)
    assert "GPM: tensor cores 71 % · SM 93 % · DRAM 12 % during the timed steps" in row_cells(row)[-1]
    line = next(csv.DictReader(io.StringIO(to_csv([row]))))
    assert float(line["tensor_active_pct"]) == 71.0 and float(line["dram_active_pct"]) == 12.0
    assert line["gpm_note"] == ""
    assert '"tensor_active": 71' in to_json([row])


def test_gpm_after_an_amp_flip_the_live_tab_says_whether_tensor_cores_rose():
    from dataclasses import replace

    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.result import RunResult
    from gpuplay.core.studies.session import LiveSession
    from gpuplay.tui.viewmodels import stats_info

    def result(spec, tensor):
        r = RunResult(spec=spec, status="ok")
        r.telemetry = {"gpu": {"activity": {"tensor_active": tensor, "sm_active": 90.0, "dram_active": 20.0}}}
        return r

    off = RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0")
    on = replace(off, amp="bf16")
    session = LiveSession(load_scenarios())
    session.results = [result(off, 4.0), result(replace(off, dtype="float64"), 0.0)]
    session.live_result = session.results[-1]
    assert "activity_change" not in stats_info(session)  # float64 differs in more than AMP
    session.results.append(result(on, 71.0))
    session.live_result = session.results[-1]
    info = stats_info(session)
    assert info["activity"] == "tensor cores 71 % · SM 90 % · DRAM 20 %"
    assert info["activity_change"] == "tensor-core activity rose after AMP off → bf16: 4 % → 71 %"
    session.results.append(result(replace(on, tf32=True), 70.0))
    session.live_result = session.results[-1]
    assert (
        stats_info(session)["activity_change"]
        == "tensor-core activity did not change after TF32 off → on: 71 % → 70 %"
    )


def test_gpm_monitor_prints_each_gpus_activity_or_its_reason(monkeypatch):
    import json

    from click.testing import CliRunner

    from gpuplay.cli import main

    fake = _two_gpus(monkeypatch, [H100, A100])
    fake.busy(0, MATMUL)
    table = CliRunner().invoke(main, ["monitor", "--count", "2", "--interval", "0.05", "--format", "table"])
    assert table.exit_code == 0, table.output
    for line in table.stdout.strip().splitlines():
        assert "GPU0" in line and "[tensor cores 71 % · SM 93 % · DRAM 12 %]" in line
        assert "has no GPM counters (they start with Hopper" in line
    js = CliRunner().invoke(main, ["monitor", "--count", "1", "--interval", "0.05"])
    gpus = json.loads(js.stdout)["gpus"]
    assert gpus[0]["activity"]["tensor_active"] == 71.0 and "reason" in gpus[1]["activity"]
    assert fake.gpm_live == set()  # the stream freed its samples when the monitor stopped


def test_gpm_availability_per_gpu_in_gpuplay_info(monkeypatch):
    from click.testing import CliRunner

    from gpuplay.cli import main

    _two_gpus(monkeypatch, [H100, A100])
    monkeypatch.setattr(F, "nvmlSystemGetDriverVersion", lambda self: "580.65", raising=False)
    out = CliRunner().invoke(main, ["info"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip().startswith("GPU ")]
    assert lines[at[0] + 1].strip() == "GPM: available"
    assert lines[at[1] + 1].strip().startswith("GPM n/a: NVIDIA A100-SXM4-80GB has no GPM counters")


def test_gpm_stream_closed_mid_snapshot_keeps_no_sample(monkeypatch):
    from gpuplay.core.hw.nvidia import GpmStream
    from gpuplay.core.measure import telemetry

    fake = _two_gpus(monkeypatch, [H100])
    stream = GpmStream(telemetry.nvml)  # as the app's Sampler holds it
    stream.read(0, fake.nvmlDeviceGetHandleByIndex(0), "NVIDIA H100 PCIe")
    stream.close()  # the Telemetry tab left the screen while the sampler thread was reading
    late = stream.read(0, fake.nvmlDeviceGetHandleByIndex(0), "NVIDIA H100 PCIe")
    assert "no view shows it" in late.reason and fake.gpm_live == set()


def test_gpm_sample_is_freed_when_the_step_fails_inside_the_timed_loop(monkeypatch, tmp_path):
    """A step that raises between the window's two samples (user code, an OOM): the run fails,
    and the first GPM buffer is still freed and the window's sampling thread stopped; before,
    `end` was never called, so a long-lived engine leaked one NVML buffer and one thread per run."""

    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.runner import run
    from gpuplay.core.workloads.usercode import code_ref

    fake = _two_gpus(monkeypatch, [H100])
    code = tmp_path / "late_boom.py"
    code.write_text(
        "calls = [0]\n"
        "def inputs(rng, n=8):\n"
        "    return rng.standard_normal(n)\n"
        "def step(xp, x):\n"
        "    calls[0] += 1\n"
        "    if calls[0] > 6:\n"
        "        raise RuntimeError('fails in the timed steps')\n"
        "    return x * 2.0\n"
    )
    begun: list[object] = []

    class OnTheFakeGpu(RunTelemetry):
        def begin(self, device):
            begun.append(device)
            return super().begin("cuda:0")

    before = {t.ident for t in threading.enumerate()}
    r = run(RunSpec.make(code_ref(code), {}, warmup=1, repeat=50, threads=1), telemetry=OnTheFakeGpu())
    assert r.status == "failed" and "fails in the timed steps" in r.message
    assert begun, "the step failed before the timed window opened: the test proves nothing"
    assert fake.gpm_live == set()  # the window's first sample freed on the failure path too
    deadline = time.monotonic() + 5
    while {t.ident for t in threading.enumerate()} - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert {t.ident for t in threading.enumerate()} - before == set()  # its sampler stopped


def test_gpm_window_within_nvmls_refresh_is_na_not_an_idle_gpu(monkeypatch):
    """NVML's GPM documentation: the two nvmlGpmSampleGet calls must lie more than 100 ms apart
    (the counters' refresh); closer samples hold the same counters, whose metrics read as an idle
    GPU. A run's timed steps shorter than that get the reason, not "tensor cores 0 %"; the live
    tab polled again within the refresh keeps its last figures and its open window."""
    from gpuplay.core.hw.nvidia import GpmStream
    from gpuplay.core.measure.telemetry import RunTelemetry
    from gpuplay.core.runner import run

    fake = _two_gpus(monkeypatch, [H100])
    fake.busy(0, MATMUL)

    class OnTheFakeGpu(RunTelemetry):
        def begin(self, device):
            return super().begin("cuda:0")

    r = run(RunSpec.make("matmul", {"n": 8}, repeat=3, warmup=1, threads=1), telemetry=OnTheFakeGpu())
    assert r.status == "ok", r.message
    activity = r.telemetry["gpu"]["activity"]
    assert "tensor_active" not in activity and "over 100 ms between its samples" in activity["reason"]
    assert "tensor cores" not in r.conditions["gpu_activity"]
    assert fake.gpm_live == set()

    from gpuplay.core.measure import telemetry

    stream = GpmStream(telemetry.nvml)
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    assert stream.read(0, handle).values == {}  # the first sample opens the window
    fake.work(0, 1.0, MATMUL)
    first = stream.read(0, handle)
    assert first.values["tensor_active"] == pytest.approx(71.0, abs=1.0)
    again = stream.read(0, handle)  # polled again at once: within the refresh
    assert again.values == first.values and not again.reason
    stream.close()
    assert fake.gpm_live == set()


@pytest.mark.parametrize("n", [float("nan"), float("inf"), -1.0, True])
def test_a_byte_count_that_is_no_count_reads_na_not_a_crash(n):
    """fmt_bytes is shared by OOM refusals, the peak-memory note and the Collectives chart: a NaN
    from a glitching counter or a file raised ValueError in int(n) before."""
    from gpuplay.core.backends.oom import fmt_bytes

    assert fmt_bytes(n) == "n/a"
    assert fmt_bytes(3 * 2**30) == "3.00 GiB" and fmt_bytes(12) == "12 B"


def test_a_gpm_figure_that_is_a_flag_is_not_a_reading():
    """float(True) is 1.0: a bool in a GPM reading (a fake, a file) must read n/a, not '1 %'."""
    from gpuplay.core.hw.nvidia import bounded

    assert bounded("tensor_active", True) is None and bounded("tensor_active", 71) == 71.0


def test_a_host_held_up_while_sampling_says_the_windows_length_is_unsure(monkeypatch):
    """A sample's time is read on the host around the driver's call. Held up inside it (the
    loaded 2-core machine: 0.16 s), a 1.2 s window read 1.36 s, and a cold run that multiplies the
    rates by the window took its flushes out of the wrong count: the steps' DRAM read 38 % for 16 %
    (the cold run's side: tests/unit/test_cold_flush_windows.py)."""
    from gpuplay.core.measure.telemetry import RunTelemetry

    fake = _two_gpus(monkeypatch, [H100])
    tele = RunTelemetry()
    token = tele.begin("cuda:0")
    fake.work(0, 1.2, MATMUL)
    taken = fake.nvmlGpmSampleGet

    def held_up(handle, sample):
        taken(handle, sample)
        fake.gpm_clock += 0.16  # descheduled after the driver took the sample, before the clock is read

    monkeypatch.setattr(fake, "nvmlGpmSampleGet", held_up)
    a = tele.end(token)["gpu"]["activity"]
    assert a["dram_active"] == pytest.approx(12.0)  # the driver's rates hold whatever the host did
    assert a["window_unsure_s"] == pytest.approx(0.08), a  # the window's length does not
    assert fake.gpm_live == set()
