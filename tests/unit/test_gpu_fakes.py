"""The GPU paths on a CPU machine: each defect pinned through fakes (tests/unit/gpu_fakes.py).

Items 4 and 13 (tolerances, widening on the host) are pinned with the check's code elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import Availability, DeviceInfo
from gpuplay.core.spec import Plan, RunSpec
from tests.unit.gpu_fakes import (
    FakeCuda,
    FakeCupy,
    FakeGpu,
    FakePynvml,
    fake_torch,
    install_cuda_run,
    install_cuda_uuids,
    install_nvml,
)

pytestmark = pytest.mark.gpu_fake
ROOT = Path(__file__).resolve().parents[2]
UNSEEN_PID = 2**22 + 4321  # above Linux's largest pid_max: never a process of this namespace


@pytest.fixture
def torch_with_two_gpus(monkeypatch):
    """The torch backend and planner believing two CUDA devices are here."""
    from gpuplay.core.catalogue import planner

    backend = get_backend("torch")
    devices = [DeviceInfo("cpu", "cpu"), DeviceInfo("cuda:0", "H100"), DeviceInfo("cuda:1", "H100")]
    monkeypatch.setattr(backend, "probe", lambda timeout=None: (Availability(True), devices))
    monkeypatch.setattr(planner, "device_refusal", lambda *a, **k: None)
    return backend


# -- CUDA graphs on cuda:N ------------------------------------------------------------------
def test_graph_capture_on_cuda_1_runs_with_cuda_1_current_on_a_side_stream(monkeypatch):
    from gpuplay.core.backends import torch_backend

    cuda = FakeCuda()
    monkeypatch.setattr(torch_backend, "_torch", lambda: fake_torch(cuda))
    seen = []

    def step():
        seen.append(cuda.current)
        return "out"

    replay = torch_backend.TorchBackend().capture_graph(step, "cuda:1")
    assert seen == [1, 1, 1]  # two warm-up calls and the captured one, all with cuda:1 current
    (capture,) = cuda.captures
    assert capture == {"current": 1, "stream_device": 1}
    side = [s for s in cuda.streams if s.device == 1]
    assert len(side) >= 2 and all(d == 1 for d in cuda.stream_ctx)  # warm-up on a side stream of cuda:1
    assert replay() == "out"


def test_configured_makes_the_runs_device_current(monkeypatch):
    from gpuplay.core.backends import torch_backend

    cuda = FakeCuda()
    monkeypatch.setattr(torch_backend, "_torch", lambda: fake_torch(cuda))
    spec = RunSpec(workload="matmul", backend="torch", device="cuda:1")
    with torch_backend.TorchBackend().configured(spec):
        assert cuda.current == 1
    assert cuda.current == 0


# -- NVML by UUID, MIG ------------------------------------------------------------------------
# NVML's order (PCI bus) against CUDA's: CUDA_VISIBLE_DEVICES=1,0 (or FASTEST_FIRST) swaps them.
GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-1111-1111-1111-111111111111"
MIG_B = "MIG-cccccccc-2222-2222-2222-222222222222"


def test_cuda_index_is_mapped_to_nvml_by_uuid_not_by_index(monkeypatch):
    from gpuplay.core.measure import telemetry

    install_nvml(
        monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A", util=10), FakeGpu(GPU_B, "board B", util=90)])
    )
    install_cuda_uuids(monkeypatch, [GPU_B.removeprefix("GPU-"), GPU_A.removeprefix("GPU-")])
    # a run on cuda:0 reports board B's figures
    tele = telemetry.RunTelemetry()
    gpu = tele.end(tele.begin("cuda:0"))["gpu"]
    # (a window shorter than NVML's 1-second averaging keeps its reading apart)
    assert gpu["name"] == "board B" and gpu["index"] == 1 and gpu["util_nvml_percent"] == 90.0
    # through the public mapping the GPU kit uses
    target = telemetry.nvml_handle_for_cuda_device("cuda:0")
    assert target is not None and target.nvml_index == 1 and target.uuid == GPU_B and not target.mig
    assert telemetry.nvml_handle_for_cuda_device(1).nvml_index == 0
    rows = telemetry.cuda_nvml_mapping()
    assert [(r["cuda"], r["nvml_index"], r["uuid"]) for r in rows] == [
        ("cuda:0", 1, GPU_B),
        ("cuda:1", 0, GPU_A),
    ]


def test_a_mig_instance_reports_its_parent_labelled_and_utilisation_na(monkeypatch):
    from gpuplay.core.measure import telemetry

    install_nvml(monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B", mig=[MIG_B])]))
    install_cuda_uuids(monkeypatch, [MIG_B])  # torch spells a MIG instance's UUID with its prefix
    tele = telemetry.RunTelemetry()
    gpu = tele.end(tele.begin("cuda:0"))["gpu"]
    assert gpu["mig"] and gpu["util_mean_percent"] is None and "n/a under MIG" in gpu["mig_note"]
    assert gpu["name"] == "board B"
    target = telemetry.nvml_handle_for_cuda_device("cuda:0")
    assert target is not None and target.mig and target.nvml_index == 1 and target.uuid == MIG_B


def test_an_unmatched_cuda_device_gets_no_telemetry_rather_than_another_gpus(monkeypatch):
    from gpuplay.core.measure import telemetry

    install_nvml(monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A")]))
    install_cuda_uuids(monkeypatch, ["deadbeef" * 4])
    out = telemetry.RunTelemetry().end(telemetry.RunTelemetry().begin("cuda:0"))
    assert out["gpu"] is None and "cannot tell which NVML device" in out["gpu_note"]
    assert telemetry.nvml_handle_for_cuda_device("cuda:0") is None


# -- optional imports -----------------------------------------------------------------------
@pytest.mark.parametrize("missing", ["threadpoolctl", "psutil", "platformdirs"])
def test_a_missing_optional_library_costs_its_feature_only(missing, tmp_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules[{missing!r}] = None  # the import fails as if it were not installed
        from gpuplay.core.runner import run
        from gpuplay.core.spec import RunSpec
        from gpuplay.core.measure.telemetry import RunTelemetry, snapshot
        from gpuplay.core.storage.config import config_dir, state_dir
        r = run(RunSpec.make("matmul", {{"n": 64}}, repeat=3, warmup=1, threads=1), telemetry=RunTelemetry())
        assert r.status == "ok" and r.check_ok, (r.status, r.message)
        snapshot()
        print(config_dir(), state_dir(), r.conditions["threads"]["numpy_blas"], "|".join(r.notes))
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT),
        "XDG_STATE_HOME": str(tmp_path),
    }
    env.pop("GPUPLAY_CONFIG_DIR", None)
    env.pop("GPUPLAY_STATE_DIR", None)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    if missing == "threadpoolctl":
        assert "threadpoolctl is not installed" in out.stdout
    if missing == "platformdirs":
        assert str(tmp_path / "gpuplay") in out.stdout


# -- torch.compile state ----------------------------------------------------------------------
def test_a_compile_that_captured_no_graph_is_reported_eager_not_timed_as_compiled(monkeypatch):
    from gpuplay.core.backends import torch_backend
    from gpuplay.core.runner import run

    # A "compiled" callable that dynamo never saw: what a silent eager fallback looks like.
    monkeypatch.setattr(torch_backend.TorchBackend, "compile", lambda self, fn, mode: fn)
    r = run(RunSpec.make("matmul", {"n": 32}, backend="torch", compile="default", repeat=3, warmup=1))
    assert r.status == "ok"
    assert r.conditions["compile"].startswith("fell back to eager")
    assert r.failure == "compile" and any("EAGER" in n for n in r.notes)


def test_dynamo_counters_tell_breaks_recompiles_and_the_limit():
    from gpuplay.core.backends.compile_watch import after_first_call, during_timing, read_counters

    before = read_counters({"frames": {"total": 1}, "stats": {"unique_graphs": 1}})
    broke = read_counters(
        {"frames": {"total": 3}, "stats": {"unique_graphs": 3}, "graph_break": {"print\nmore": 1}}
    )
    found = after_first_call(before, broke)
    assert not found.fallback and found.graph_breaks == 1 and "print" in found.notes[0]
    assert after_first_call(before, before).fallback  # no graph: eager
    limit = read_counters(
        {
            "frames": {"total": 9},
            "stats": {"unique_graphs": 1},
            "unimplemented": {"Dynamo recompile limit exceeded": 1},
        }
    )
    assert "recompile limit" in during_timing(before, limit, limit).fallback  # hit in warm-up
    warm = read_counters({"frames": {"total": 2}})
    assert during_timing(before, warm, warm).recompiles == 0  # a warm-up recompile is not timed
    assert during_timing(before, before, warm).recompiles == 1


@pytest.mark.slow
@pytest.mark.compile
def test_a_second_compiled_run_in_one_process_compiles_again():
    """The engine's situation: without a dynamo reset the second run's compile is a cache hit (~0 s)."""
    from gpuplay.core.runner import run

    spec = RunSpec.make("elementwise", {"n": 4096}, backend="torch", compile="default", repeat=3, warmup=1)
    first, second = run(spec), run(spec)
    for r in (first, second):
        assert r.status == "ok" and r.check_ok and r.conditions["compile"] == "default", r.notes
    # Without the reset the second call is dynamo's in-memory hit: 0.00018 s. With it, dynamo traces
    # again; inductor may still serve the kernels from its on-disk FX graph cache (~0.04 s).
    assert second.compile_s > 0.01, (first.compile_s, second.compile_s)


# -- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "workload, params, kw, words",
    [
        ("matmul", {"n": 64}, {"cuda_graphs": True, "compile": "max-autotune"}, "CUDA graphs of its own"),
        ("matmul", {"n": 64}, {"cuda_graphs": True, "transfers": True}, "cannot capture"),
        ("transfers", {"n": 4096, "op": "h2d"}, {"compile": "default"}, "not safe to compile"),
        ("sparse", {"n": 64}, {"compile": "default"}, "not safe to compile"),
    ],
)
def test_combinations_that_cannot_work_are_refused_with_a_reason(
    torch_with_two_gpus, workload, params, kw, words
):
    from gpuplay.core.catalogue import planner

    spec = RunSpec.make(workload, params, backend="torch", device="cuda:1", **kw)
    verdict = planner.check(spec, 0)
    assert not isinstance(verdict, Plan) and words in str(verdict)


# -- transfer streams -------------------------------------------------------------------------
def test_overlap_streams_are_made_on_the_runs_device(monkeypatch):
    import torch

    from gpuplay.core.workloads.transfers import Transfers

    made = []
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None, **k: made.append(str(device)) or object())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: made.append(f"current {device}"))
    w = Transfers()
    for op in ("overlap", "serial"):
        p = w.resolve({"n": 4096, "op": op, "memory": "pageable"})
        w.prepare("torch", "cuda:1", (torch.zeros(4096),), p)
    assert made == ["cuda:1", "cuda:1", "current cuda:1"]


# -- CuPy caches ------------------------------------------------------------------------------
def test_cupy_caches_are_freed_on_every_device_used(monkeypatch):
    from gpuplay.core.backends.cupy_backend import CupyBackend

    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    b = CupyBackend()
    with b._device("cuda:1"):
        pass
    b.free_memory("cuda:0")
    assert ("device", 0) in fake.freed and ("device", 1) in fake.freed
    assert ("fft-plans", 0) in fake.freed and ("fft-plans", 1) in fake.freed
    assert ("pinned", None) in fake.freed


# -- cold cache ---------------------------------------------------------------------------------
def test_the_flush_runs_between_steps_outside_the_timed_interval():
    from gpuplay.core.runner.loop import timed_loop

    events = []

    def timer(fn):
        events.append("start")
        fn()
        events.append("stop")
        return 1e-3, None

    timed_loop(
        lambda: events.append("step"),
        timer,
        phase="timed",
        count=3,
        cancel=threading.Event(),
        between=lambda: events.append("flush"),
    )
    assert events == ["flush", "start", "step", "stop"] * 3


def test_a_cold_run_says_so_in_its_result():
    from gpuplay.core.result import RunResult
    from gpuplay.core.runner import run

    r = run(RunSpec.make("elementwise", {"n": 65536}, cache="cold", repeat=3, warmup=1))
    assert r.status == "ok" and r.check_ok
    assert r.conditions["cache"].startswith("cold:") and "MiB buffer read" in r.conditions["cache"]
    assert "+cold" in r.spec.label()
    assert RunResult.from_dict(r.to_dict()).spec.cache == "cold"
    warm = run(RunSpec.make("elementwise", {"n": 65536}, repeat=3, warmup=1))
    assert warm.conditions["cache"].startswith("warm")


def test_the_gpu_flush_buffer_is_larger_than_l2_and_on_the_runs_device(monkeypatch):
    from gpuplay.core.backends import torch_backend

    made = {}

    class Buf:
        def __init__(self, n, dtype, device):
            made.update(n=n, device=device, zeroed=0)

        def zero_(self):
            made["zeroed"] += 1

    l2 = 50 * 2**20
    fake = SimpleNamespace(
        uint8="uint8",
        empty=Buf,
        cuda=SimpleNamespace(get_device_properties=lambda i: SimpleNamespace(L2_cache_size=l2 * (i + 1))),
    )
    monkeypatch.setattr(torch_backend, "_torch", lambda: fake)
    flush = torch_backend.TorchBackend().cache_flusher("cuda:1")
    flush()
    assert made == {"n": max(256 * 2**20, 4 * 2 * l2), "device": "cuda:1", "zeroed": 1}
    assert "L2 100 MiB" in flush.describe()


# -- telemetry during the run ------------------------------------------------------------------
def test_gpu_means_are_sampled_during_the_run_and_slow_queries_stay_out(monkeypatch):
    from gpuplay.core.measure import telemetry

    fake = FakePynvml([FakeGpu(GPU_A, "board A")])
    install_nvml(monkeypatch, fake)
    install_cuda_uuids(monkeypatch, [GPU_A])
    tele = telemetry.RunTelemetry()  # as the engine makes it: no app Sampler
    t0 = time.monotonic()
    token = tele.begin("cuda:0")
    time.sleep(0.55)  # the timed loop
    out = tele.end(token)
    t1 = time.monotonic()
    assert out["gpu"]["samples"] >= 5  # the two ends and three or more taken during the phase
    assert out["gpu"]["samples_during"] >= 3
    assert fake.calls_between(t0, t1, "nvmlDeviceGetPcieThroughput") == 0


# -- container PID namespace -------------------------------------------------------------------
def _noise_for(monkeypatch, procs):
    from gpuplay.core.measure import telemetry
    from gpuplay.core.measure.noise import gpu_warnings

    install_nvml(monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A", procs=procs)]))
    install_cuda_uuids(monkeypatch, [GPU_A])
    tele = telemetry.RunTelemetry()
    g = tele.end(tele.begin("cuda:0"))["noise"]["gpu"]
    return g, gpu_warnings(g)


def test_our_own_process_under_a_host_pid_is_not_another_process(monkeypatch):
    g, warnings = _noise_for(monkeypatch, [(UNSEEN_PID, 3 * 2**30)])
    assert g["other_processes"] == [] and not g.get("unknown_processes")
    assert not any("other process" in w for w in warnings)


def test_several_host_pids_in_a_container_say_cannot_tell(monkeypatch):
    g, warnings = _noise_for(monkeypatch, [(UNSEEN_PID, 3 * 2**30), (UNSEEN_PID + 1, 2**30)])
    assert g["other_processes"] == [] and g["unknown_processes"] == 2
    assert any("cannot tell in a container" in w for w in warnings)


def test_a_visible_other_process_is_still_named(monkeypatch):
    g, warnings = _noise_for(monkeypatch, [(os.getpid(), 2**30), (os.getppid(), 2**30)])
    assert [p["pid"] for p in g["other_processes"]] == [os.getppid()]
    assert any("1 other process(es)" in w for w in warnings)


# -- AMP with a forced SDPA backend ------------------------------------------------------------
def test_amp_with_a_forced_sdpa_backend_is_probed_in_the_autocast_dtype(torch_with_two_gpus, monkeypatch):
    import torch  # noqa: F401 - the attention workload probes only where torch is loaded

    from gpuplay.core.catalogue import planner
    from gpuplay.core.workloads import attention

    probed = []

    def flash_like(sdpa, device, dtype, causal, head_dim):
        probed.append(dtype)  # flash attention refuses float32, runs half precision
        return None if dtype in ("float16", "bfloat16") else "flash needs float16 or bfloat16"

    monkeypatch.setattr(attention, "sdpa_refusal", flash_like)
    amp = RunSpec.make("attention", {"sdpa": "flash"}, backend="torch", device="cuda:1", amp="bf16")
    assert isinstance(planner.check(amp, 0), Plan)
    assert probed == ["bfloat16"]
    plain = RunSpec.make("attention", {"sdpa": "flash"}, backend="torch", device="cuda:1")
    assert "float16 or bfloat16" in str(planner.check(plain, 0))


# -- synchronize before the check reads host buffers --------------------------------------------
def test_the_check_waits_for_the_device_before_reading_the_result(monkeypatch):
    from gpuplay.core.runner import run, steps

    backend = get_backend("numpy")
    events = []
    real_build, real_to_host = steps.build_step, backend.to_host

    def build(*a, **k):
        step = real_build(*a, **k)
        return lambda: events.append("step") or step()

    monkeypatch.setattr(steps, "build_step", build)
    monkeypatch.setattr(backend, "synchronize", lambda device: events.append("sync"))
    monkeypatch.setattr(backend, "to_host", lambda x: events.append("to_host") or real_to_host(x))
    r = run(RunSpec.make("transfers", {"n": 4096, "op": "copy"}, repeat=2, warmup=0))
    assert r.status == "ok" and r.check_ok
    assert events[-3:] == ["step", "sync", "to_host"]


# -- collectives as nccl-tests ---------------------------------------------------------------------
def test_collectives_time_a_loop_of_ops_after_one_barrier():
    from gpuplay.collectives.bench import loop_plan, time_loops

    log = []
    clock = iter(range(0, 1000, 10))
    times = time_loops(
        run_op=lambda: log.append("op"),
        barrier=lambda: log.append("barrier"),
        complete=lambda: log.append("complete"),
        loops=2,
        ops=4,
        clock=lambda: float(next(clock)),
    )
    assert log == (["barrier"] + ["op"] * 4 + ["complete"]) * 2
    assert times == [10 / 4, 10 / 4]  # one clock span per loop, divided by its op count
    assert loop_plan(20) == (5, 4) and loop_plan(3) == (3, 1)


@pytest.mark.slow
def test_a_one_rank_sweep_reports_the_nccl_tests_way():
    from gpuplay.collectives.bench import RankEnv, SweepOptions, run_rank

    sweep = run_rank(
        SweepOptions(ops=["all_reduce"], sizes=[4096], iters=10, warmup=1), RankEnv.from_environ({})
    )
    (row,) = sweep.results
    assert row["check_ok"] and row["ops_per_sample"] == 2 and len(row["samples_s"]) == 5
    assert len(row["rank_mean_s"]) == 5 and "BenchTime" in sweep.meta["timing"]


# -- the cupy extra and CUDA majors ---------------------------------------------------------------
def test_the_plain_cupy_extra_matches_torch_2_13s_cuda_13():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(r.startswith("cupy-cuda13x") for r in extras["cupy"])
    assert any(r.startswith("cupy-cuda12x") for r in extras["cupy-cuda12"])


def test_info_warns_when_cupys_cuda_major_differs_from_torchs(monkeypatch):
    import torch

    from gpuplay.core.reports import info

    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(info, "cupy_cuda_major", lambda: 12)
    data = info.gather(probe_timeout=30)
    (warning,) = [w for w in data["warnings"] if "CuPy" in w]
    assert "CUDA 12" in warning and "13.0" in warning and "pip install cupy-cuda13x;" in warning
    assert info.cuda_major_mismatch("13.0", 13) == "" and info.cuda_major_mismatch(None, 12) == ""


# -- precision API, the estimate's floor, sticky errors ----------------------------------------------
def test_tf32_is_set_through_both_precision_apis_which_agree(monkeypatch):
    from gpuplay.core.backends import torch_backend

    cuda = FakeCuda()
    torch = fake_torch(cuda)
    monkeypatch.setattr(torch_backend, "_torch", lambda: torch)
    spec = RunSpec(workload="matmul", backend="torch", device="cuda:0", tf32=True)
    with torch_backend.TorchBackend().configured(spec):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        assert torch.backends.cudnn.conv.fp32_precision == "tf32"
        # the legacy getters answer (inductor reads them), and say the same
        assert torch.get_float32_matmul_precision() == "high"
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert torch.backends.cuda.matmul.fp32_precision == "none"  # restored
    assert torch.get_float32_matmul_precision() == "highest"


def test_tf32_falls_back_to_set_float32_matmul_precision_on_an_older_torch():
    from gpuplay.core.backends.torch_backend import fp32_matmul_precision

    state = {"precision": "highest"}
    old = SimpleNamespace(
        backends=SimpleNamespace(
            cuda=SimpleNamespace(matmul=SimpleNamespace()), cudnn=SimpleNamespace(allow_tf32=True)
        ),
        get_float32_matmul_precision=lambda: state["precision"],
        set_float32_matmul_precision=lambda p: state.update(precision=p),
    )
    with fp32_matmul_precision(old, True):
        assert state["precision"] == "high"
    assert state["precision"] == "highest"


def test_a_launch_bound_step_is_not_extrapolated_linearly():
    from gpuplay.core.runner.plan import plan_run
    from gpuplay.core.runner.preflight import estimate_step_seconds

    plan = plan_run(RunSpec.make("matmul", {"n": 4096}))
    # Every probe costs the same 1 ms (a launch floor): so will the full size.
    est = estimate_step_seconds(plan, lambda fn: (1e-3, None), 30.0, threading.Event())
    assert est == pytest.approx(1e-3, rel=0.01)


def test_a_compute_bound_step_is_extrapolated_by_its_rate():
    from gpuplay.core.runner.preflight import extrapolate

    # 1 ms floor + 1 ns per unit of work: two probes fix both
    pts = [(1e6, 1e-3 + 1e-3), (2e6, 1e-3 + 2e-3)]
    assert extrapolate(pts, 1e9) == pytest.approx(1e-3 + 1.0)


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: an illegal instruction was encountered",
        "CUDA error: misaligned address",
        "CUDA error: the launch timed out and was terminated",
        "CUDA error: unspecified launch failure",
        "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
        "cudaErrorHardwareStackError: hardware stack error",
        "CUDA error: uncorrectable ECC error encountered",
    ],
)
def test_sticky_cuda_errors_are_recognised(message):
    from gpuplay.core.measure.cuda_errors import is_sticky_cuda_error

    assert is_sticky_cuda_error(message)
    assert not is_sticky_cuda_error("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_the_profile_path_reports_a_poisoned_context_and_the_engine_restarts(monkeypatch):
    from gpuplay.core.engine import server
    from gpuplay.core.runner import steps

    def poisoned(*a, **k):
        def step():
            raise RuntimeError("CUDA error: an illegal instruction was encountered\nmore")

        return step

    monkeypatch.setattr(steps, "build_step", poisoned)
    from gpuplay.core.engine.messages import Profiled, ProfileRequest, decode

    sent, exits = [], []
    engine = server.EngineServer(SimpleNamespace(send_bytes=lambda data: sent.append(decode(data))))
    monkeypatch.setattr(server.os, "_exit", exits.append)
    engine.do(ProfileRequest(7, RunSpec.make("matmul", {"n": 32}, backend="torch"), 1))

    ((answer,),) = [sent]
    assert isinstance(answer, Profiled)
    assert (answer.run_id, answer.data["failure"]) == (7, "cuda-context")
    assert exits == [server.STICKY_EXIT_CODE]


def test_without_torch_loaded_the_mapping_reads_the_environment_as_nvitop(monkeypatch):
    from gpuplay.core.measure import telemetry

    install_nvml(monkeypatch, FakePynvml([FakeGpu(GPU_A, "board A"), FakeGpu(GPU_B, "board B")]))
    monkeypatch.delitem(sys.modules, "torch")  # the UI process: torch never loaded
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert telemetry.nvml_handle_for_cuda_device("cuda:0") is None  # FASTEST_FIRST: an index tells nothing
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert telemetry.nvml_handle_for_cuda_device("cuda:0").nvml_index == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", GPU_B)
    monkeypatch.delenv("CUDA_DEVICE_ORDER")
    assert telemetry.nvml_handle_for_cuda_device("cuda:0").nvml_index == 1
    assert "torch" not in sys.modules


def test_the_precision_helper_works_on_the_installed_torch():
    import torch

    from gpuplay.core.backends.torch_backend import fp32_matmul_precision

    before = torch.backends.cuda.matmul.fp32_precision
    with fp32_matmul_precision(torch, True):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    with fp32_matmul_precision(torch, False):
        assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert torch.backends.cuda.matmul.fp32_precision == before


def _run_on_cuda(**kw):
    from gpuplay.core.runner import run

    params = kw.pop("params", {"n": 4096})
    workload = kw.pop("workload", "elementwise")
    kw = {"repeat": 5, "warmup": 1, **kw}
    return run(RunSpec.make(workload, params, backend="torch", device="cuda:0", **kw))


# -- one timing convention for warm and cold steps ---------------------------------------------
@pytest.mark.parametrize("kernels", [((10e-6, 2e-6),) * 5, ((1e-6, 300e-6),)])  # launch-bound, device-bound
def test_a_cold_step_never_reads_faster_than_the_warm_one_by_construction(monkeypatch, kernels):
    cuda = FakeCuda(1)
    install_cuda_run(monkeypatch, cuda, kernels=kernels)
    warm, cold = _run_on_cuda(cache="warm"), _run_on_cuda(cache="cold")
    assert warm.status == cold.status == "ok"
    # The simulated stream has no cache: the same step must read the same, cold never below warm.
    assert cold.median >= warm.median * (1 - 1e-9), (cold.samples, warm.samples)
    # Host dispatch of the five launches is inside both (50 µs of the launch-bound step's 52).
    assert warm.median == pytest.approx(sum(d for d, _ in kernels) + kernels[-1][1], rel=1e-6)
    for r in (warm, cold):
        assert "idle GPU" in r.conditions["timing"] and "dispatch" in r.conditions["timing"]


def test_a_cold_run_paired_with_numpy_flushes_before_each_of_its_paired_steps(monkeypatch):
    from gpuplay.core.runner.paired import run_paired
    from gpuplay.core.studies.compare import baseline_spec

    cuda = FakeCuda(1)
    install_cuda_run(monkeypatch, cuda)
    spec = RunSpec.make("elementwise", {"n": 4096}, backend="torch", device="cuda:0", cache="cold", repeat=6,
                        warmup=2)  # fmt: skip
    r = run_paired(spec, baseline_spec(spec))
    assert r.status == "ok" and r.speedup is not None, r.message
    assert r.conditions["cache"].startswith("cold:")
    # Timed as labelled: a flush before every paired step too, not only in the warm-up
    # (elementwise at 4096 is µs-fast: several candidate steps per paired element).
    assert cuda.sim.flushes >= spec.warmup + len(r.samples)
    assert min(r.samples) >= 52e-6 * (1 - 1e-9)  # the launch-bound step's dispatch, as unpaired


# -- reduce-overhead's CUDA graph is recorded outside the samples --------------------------------
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_cudagraph_compile_records_before_the_timed_steps(monkeypatch, mode):
    from gpuplay.core.backends import torch_backend

    cuda = FakeCuda(1)
    calls = {"n": 0}

    def cudagraph_tree(fn, mode):
        # inductor's cudagraph trees (torch/_inductor/cudagraph_trees.py): the first call compiles
        # and runs eagerly as the warm-up, the second records the graph (50 ms here), every later
        # call replays it.
        def compiled(*args):
            calls["n"] += 1
            if calls["n"] == 2:
                cuda.sim.launch(0.0, 50e-3)
            return fn(*args)

        return compiled

    monkeypatch.setattr(
        torch_backend.TorchBackend, "compile", lambda self, fn, mode: cudagraph_tree(fn, mode)
    )
    monkeypatch.setattr(torch_backend.TorchBackend, "compile_counts", lambda self: None)
    install_cuda_run(monkeypatch, cuda)
    r = _run_on_cuda(compile=mode, warmup=0, repeat=5)
    assert r.status == "ok", r.message
    assert max(r.samples) < 1e-3, r.samples  # no sample holds the 50 ms recording
    assert (
        r.conditions["warmup"] >= 2 and "kept out of the timed steps" in r.conditions["cuda_graph_recording"]
    )


# -- TF32 reaches what each path reads ------------------------------------------------------------------
@pytest.mark.parametrize("tf32, want", [(True, "tf32"), (False, "ieee")])
def test_tf32_sets_the_cudnn_wide_flag_inductors_conv_templates_read(monkeypatch, tf32, want):
    import torch

    seen = []

    def read_flags(call):
        b = torch.backends
        seen.append((b.cudnn.fp32_precision, b.cudnn.conv.fp32_precision, b.cudnn.rnn.fp32_precision,
                     b.cuda.matmul.fp32_precision))  # fmt: skip

    before = (torch.backends.cudnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision)
    install_cuda_run(monkeypatch, FakeCuda(1), on_step=read_flags)
    r = _run_on_cuda(workload="matmul", params={"n": 64}, tf32=tf32)
    assert r.status == "ok" and seen
    assert set(seen) == {(want, want, want, want)}  # inductor's conv.py reads cudnn.fp32_precision
    words = r.conditions["fp32_precision"]
    assert ("TF32" in words) if tf32 else ("IEEE float32" in words and "convolutions" in words)
    assert (torch.backends.cudnn.fp32_precision, torch.backends.cudnn.conv.fp32_precision) == before
