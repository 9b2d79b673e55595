"""The simulated H100 itself, seen through gpuplay's public paths: a `gpuplay run` subprocess and
`gpuplay.run` in this process both reach an engine whose cuda:0 is the simulated board, and every
result names it as simulated (name and UUID)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.gpu_sim import SIM_NAME_MARK, SIM_UUID, read_ledger, sim_env

pytestmark = [pytest.mark.gpu_sim, pytest.mark.slow]


def gpuplay(args: list[str], env: dict[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplay", *args], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout)  # fmt: skip


def test_a_cli_run_on_cuda_is_timed_by_events_on_the_simulated_board_and_says_so(tmp_path):
    env = sim_env("h100", tmp_path)
    out = gpuplay(["run", "matmul", "-b", "torch", "-d", "cuda:0", "--budget", "0.3", "-s", "n=128",
                   "--no-energy", "--format", "json"], env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok" and r["check_ok"]
    assert SIM_NAME_MARK in r["conditions"]["device_name"]
    assert r["conditions"]["timer"] == "CUDA events"
    gpu = r["telemetry"]["gpu"]
    assert gpu["uuid"] == SIM_UUID and SIM_NAME_MARK in gpu["name"]
    assert r["peak_memory"]["source"].startswith("torch.cuda.max_memory_allocated")
    ledger = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"])
    engine = {row["pid"] for row in ledger if row["event"] == "device"}
    assert len(engine) == 1  # torch loaded (and simulated) in the engine only
    # GPM's SM activity is the simulated device's busy share between the window's two samples.
    s1, s2 = [row for row in ledger if row["event"] == "gpm_sample"][:2]
    sm = (s2["counts"]["sm"] - s1["counts"]["sm"]) / (s2["t_sample"] - s1["t_sample"])
    assert gpu["activity"]["sm_active"] == pytest.approx(sm, rel=0.02, abs=0.5)
    assert 0 < gpu["activity"]["sm_active"] <= 100


def test_gpuplay_run_in_a_test_reaches_a_simulated_engine(sim_h100):
    import gpuplay

    res = gpuplay.run("matmul", backend="torch", device="cuda:0", params={"n": 96}, budget_s=0.2,
                      baseline=False, energy=False)  # fmt: skip
    assert SIM_NAME_MARK in res.conditions["device_name"]
    assert sim_h100.ledger("reset_peak_memory_stats")
    assert "torch" not in sys.modules or not hasattr(sys.modules["torch"].cuda, "SimCudaTensor")


@pytest.mark.parametrize("runtime", ["onnxruntime", "tensorrt"])
def test_the_runtime_doubles_record_what_gpuplay_asks_of_them(tmp_path, runtime):
    env = sim_env("h100", tmp_path, runtimes=True)
    out = gpuplay(["run", "inference", "-b", "torch", "-d", "cuda:0", "-s", f"runtime={runtime}", "-p", "quick",
                   "--budget", "0.1", "--no-baseline", "--no-energy", "--format", "json"], env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)["results"][0]
    assert r["status"] == "ok" and r["check_ok"], r["message"]
    assert r["conditions"]["runtime"] == runtime
    ledger = read_ledger(env["GPUPLAY_TEST_SIM_LEDGER"])
    if runtime == "onnxruntime":
        (session,) = [row for row in ledger if row["event"] == "ort_session"]
        # float32 with TF32 off: the CUDA provider first (TensorRT's has no TF32 switch), told
        # use_tf32=0, on a stream torch made for it (a handle of 0 would read as none given)
        (cuda,) = [p for p in session["providers"] if isinstance(p, list) and p[0] == "CUDAExecutionProvider"]
        assert session["providers"][0] == cuda and session["providers"][-1] == "CPUExecutionProvider"
        opts = cuda[1]
        assert opts["device_id"] == 0 and opts["use_tf32"] == "0", opts
        assert opts["has_user_compute_stream"] == "1" and opts["user_compute_stream"] not in ("", "0"), opts
        assert session["session_options"]["graph_optimization_level"] == 99  # ORT_ENABLE_ALL
        # its threads sleep between runs (spinning slowed the step timed next, a paired partner's)
        configs = session["session_options"]["configs"]
        assert configs == {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}
        assert r["conditions"]["ort_thread_spinning"] == "off"
        assert {row["io"] for row in ledger if row["event"] == "ort_binding"} == {"input", "output"}
        assert r["conditions"]["onnxruntime"].endswith("+gpuplay.sim")
    else:
        (built,) = [row for row in ledger if row["event"] == "trt_compile"]
        assert built["ir"] == "dynamo" and built["enabled_precisions"] == ["torch.float32"]
        assert r["conditions"]["torch_tensorrt"].endswith("+gpuplay.sim")


NVML_PROBE = """
import json, sys
try:
    import pynvml
except ImportError:  # nvidia-ml-py not installed, as on many AMD or Intel machines
    pynvml = None
sim = type(pynvml).__name__ == "SimPynvml"
out = {"simulated_nvml": sim}
if sim:
    pynvml.nvmlInit()
    out["driver"] = pynvml.nvmlSystemGetDriverVersion()
    out["cuda"] = pynvml.nvmlSystemGetCudaDriverVersion_v2()
print(json.dumps(out))
"""


@pytest.mark.parametrize("kind", ["h100", "mi300", "xpu"])
def test_only_the_nvidia_board_brings_nvml(tmp_path, kind):
    """NVML is NVIDIA's: the simulated H100 answers pynvml's system calls as nvidia-ml-py documents
    them; an AMD (ROCm: amdsmi) or Intel machine has no simulated NVML, only what is installed."""
    out = subprocess.run([sys.executable, "-c", NVML_PROBE], env=sim_env(kind, tmp_path), capture_output=True,
                         text=True, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["simulated_nvml"] is (kind == "h100")
    if kind == "h100":
        assert isinstance(seen["driver"], str) and seen["driver"].count(".") == 2
        assert seen["cuda"] // 1000 >= 12 and seen["cuda"] % 1000 % 10 == 0
