"""Energy per step from fake counters: NVML's ~100 ms total-energy counter and a RAPL folder."""

from __future__ import annotations

import os

import pytest

from gpuplay.core.measure import energy
from gpuplay.core.measure.energy import Energy, NvmlCounter, measure_energy, rapl_counter
from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import (
    FakeCuda,
    FakeGpu,
    FakePynvml,
    install_cuda_run,
    install_cuda_uuids,
    install_nvml,
)


class Board:
    """A GPU drawing `idle_w` plus `step_j` per step, its counter updated every 100 ms.

    Time is kept in whole microseconds: float seconds would drift off the 100 ms grid."""

    def __init__(self, idle_w: float = 60.0, step_j: float = 0.5, step_s: float = 0.01) -> None:
        self.us, self.idle_w, self.step_j, self.step_us = 0, idle_w, step_j, round(step_s * 1e6)
        self.step_joules = 0.0  # energy of the steps, booked when they run
        self.booked: list[tuple[int, float]] = []
        self.steps = 0

    @property
    def t(self) -> float:
        return self.us / 1e6

    def advance(self, dt: float) -> None:
        self.us += max(1, round(dt * 1e6))

    def step(self) -> None:
        self.us += self.step_us
        self.step_joules += self.step_j
        self.booked.append((self.us, self.step_joules))
        self.steps += 1

    # NVML's API, as nvidia-ml-py names it: mJ, as of the last 100 ms update.
    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        tick = self.us // 100_000 * 100_000
        steps = next((j for us, j in reversed(self.booked) if us <= tick), 0.0)
        return int((1000.0 + self.idle_w * tick / 1e6 + steps) * 1000)


@pytest.mark.gpu_fake
def test_nvml_energy_per_step_is_above_idle_over_several_updates():
    board = Board()
    counter = NvmlCounter(board, handle=object(), index=1)
    e = measure_energy(counter, board.step, flops=2e9, clock=lambda: board.t, sleep=board.advance)
    assert e.status == "ok" and "whole board of GPU 1" in e.scope
    assert e.window_s >= 0.5 and board.steps >= 50, "the window spans at least 5 of the counter's updates"
    assert e.idle_w == pytest.approx(60.0, rel=0.05)
    assert e.joules_per_step == pytest.approx(0.5, rel=0.15)
    assert e.gflop_per_j == pytest.approx(2e9 / e.joules_per_step / 1e9)
    assert "mJ/step above idle" in e.text() and "whole board" in e.text()


@pytest.mark.gpu_fake
def test_a_step_below_the_counters_resolution_never_reads_zero():
    for board in (Board(idle_w=0.0, step_j=0.0), Board(idle_w=60.0, step_j=1e-6)):
        e = measure_energy(
            NvmlCounter(board, object(), 0), board.step, clock=lambda b=board: b.t, sleep=board.advance
        )
        assert e.status == "below resolution" and e.joules_per_step is None
        assert "below resolution" in e.text()


@pytest.mark.gpu_fake
def test_a_board_without_the_counter_says_so():
    class NoCounter:
        def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    assert NvmlCounter(NoCounter(), object(), 0).read_j() is None


def _rapl(root, uj: int, mode: int = 0o644) -> str:
    pkg = root / "intel-rapl:0"
    sub = root / "intel-rapl:0:0"  # a subzone (the cores): inside its package's figure, not added again
    pkg.mkdir(parents=True)
    sub.mkdir()
    (pkg / "energy_uj").write_text(f"{uj}\n")
    (pkg / "max_energy_range_uj").write_text("1000000\n")
    (sub / "energy_uj").write_text("5\n")
    os.chmod(pkg / "energy_uj", mode)
    return str(pkg)


def test_rapl_reads_packages_and_survives_a_wraparound(tmp_path):
    pkg = _rapl(tmp_path, 999_000)
    counter, reason = rapl_counter(str(tmp_path))
    assert counter is not None and reason == "" and counter.domains == [pkg]
    assert counter.read_j() == 0.0
    with open(os.path.join(pkg, "energy_uj"), "w") as f:
        f.write("3000\n")  # wrapped past max_energy_range_uj
    assert counter.read_j() == pytest.approx(4000 / 1e6)


def test_rapl_without_the_folder_or_the_right_says_why(tmp_path, monkeypatch):
    assert rapl_counter(str(tmp_path / "none")) == (None, "n/a (no RAPL)")
    _rapl(tmp_path, 1)

    def denied(path, *a, **k):
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied")
        return open_(path, *a, **k)

    open_ = open
    monkeypatch.setattr("builtins.open", denied)
    assert rapl_counter(str(tmp_path)) == (None, "n/a (needs root)")


def test_a_cpu_run_carries_its_energy_line(monkeypatch):
    from gpuplay.core.runner import run
    from gpuplay.core.spec import RunSpec

    monkeypatch.setattr(energy, "RAPL_ROOT", "/nonexistent")
    r = run(RunSpec.make("matmul", {"n": 16}, repeat=2, warmup=0))
    assert r.telemetry["energy"]["status"] == "n/a (no RAPL)"
    assert Energy(**r.telemetry["energy"]).text() == "energy: n/a (no RAPL)"
    off = run(RunSpec.make("matmul", {"n": 16}, repeat=2, warmup=0, energy=False))
    assert "energy" not in off.telemetry


def test_exports_and_the_stats_panel_carry_energy_bounded():
    import json

    from gpuplay.core.measure.energy import energy_of
    from gpuplay.core.reports.report import row_cells, to_csv, to_json
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec
    from gpuplay.core.studies.compare import Row

    spec = RunSpec.make("matmul", {"n": 16}, backend="torch", device="cuda:0")
    ok = Energy("ok", "whole board of GPU 0, every process on it", "NVML", 0.25, 8.0, 60.0, 90.0, 0.6, 40)
    r = RunResult(spec=spec, samples=[0.001] * 3, telemetry={"energy": ok.to_dict()})
    doc = json.loads(to_json([Row(r)]))["results"][0]
    assert (
        doc["energy_per_step_j"] == 0.25
        and doc["gflop_per_j"] == 8.0
        and "whole board" in doc["energy_scope"]
    )
    header, values = (line.split(",") for line in to_csv([Row(r)]).splitlines()[:2])
    assert values[header.index("energy_j_per_step")] == "0.25"
    assert "250 mJ/step above idle" in row_cells(Row(r))[-1]
    hostile = {"energy": {"status": "ok", "joules_per_step": float("inf"), "scope": "x" * 10_000, "bogus": 1}}
    e = energy_of(hostile)
    assert e is not None and e.joules_per_step is None and len(e.scope) == 200
    assert energy_of({"energy": "garbage"}) is None


GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"


GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"


MIG_B = "MIG-cccccccc-2222-2222-2222-222222222222"


def _run_on_cuda(**kw):
    from gpuplay.core.runner import run

    params = kw.pop("params", {"n": 4096})
    workload = kw.pop("workload", "elementwise")
    kw = {"repeat": 5, "warmup": 1, **kw}
    return run(RunSpec.make(workload, params, backend="torch", device="cuda:0", **kw))


class EnergyBoards(FakePynvml):
    """NVML whose energy counters are per board, each read logged with the board it was on."""

    def __init__(self, gpus):
        super().__init__(gpus)
        self.energy_reads: list[int] = []
        self.mj = [1_000_000 * (i + 1) for i in range(len(gpus))]

    def nvmlDeviceGetTotalEnergyConsumption(self, h):  # noqa: N802
        self.energy_reads.append(h.gpu)
        self.mj[h.gpu] += 40_000  # every read sees the counter move: the window ticks at once
        return self.mj[h.gpu]


# -- energy from the board CUDA's ordinal names ----------------------------------------------
@pytest.mark.gpu_fake
def test_energy_per_step_is_read_from_the_board_matched_by_uuid(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B")])
    install_nvml(monkeypatch, nvml)
    # CUDA_VISIBLE_DEVICES=1,0 (or fastest first): cuda:0 is board B, NVML's index 1.
    install_cuda_uuids(monkeypatch, [GPU_B, GPU_A])
    install_cuda_run(monkeypatch, FakeCuda(1))
    r = _run_on_cuda(energy=True)
    energy = r.telemetry["energy"]
    assert r.status == "ok" and energy["status"] in ("ok", "below resolution"), energy
    assert nvml.energy_reads and set(nvml.energy_reads) == {1}  # never board A's counter
    assert GPU_B in energy["scope"] and "NVML GPU 1" in energy["scope"]


@pytest.mark.gpu_fake
def test_energy_of_a_mig_instance_reads_its_parent_and_says_so(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B", mig=[MIG_B])])
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, [MIG_B])
    install_cuda_run(monkeypatch, FakeCuda(1))
    energy = _run_on_cuda(energy=True).telemetry["energy"]
    assert set(nvml.energy_reads) == {1}
    assert "parent GPU 1" in energy["scope"] and MIG_B in energy["scope"]


@pytest.mark.gpu_fake
def test_energy_is_refused_with_a_reason_when_no_board_has_the_uuid(monkeypatch):
    nvml = EnergyBoards([FakeGpu(GPU_A, "board A")])
    install_nvml(monkeypatch, nvml)
    install_cuda_uuids(monkeypatch, ["deadbeef" * 4])
    install_cuda_run(monkeypatch, FakeCuda(1))
    energy = _run_on_cuda(energy=True).telemetry["energy"]
    assert nvml.energy_reads == []
    assert energy["status"].startswith("n/a") and "no UUID match" in energy["status"]
