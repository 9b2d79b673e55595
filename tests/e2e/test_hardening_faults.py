"""Faults. Each leaves gpuplay usable and the next run working.

Real failures where this machine can produce them: a real MemoryError under an
address-space limit, a real torch.compile failure with no C++ compiler, NVML's
and CuPy's own errors on a machine without the NVIDIA driver.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.tui.app import GpuPlayApp
from tests.conftest import gpu_available
from tests.tui_helpers import record_notifications, tiny_scenarios, wait_until

GPUPLAY = [sys.executable, "-m", "gpuplay"]


def limited(gib: float):
    def apply() -> None:
        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_cli(args, tmp_path, preexec=None, env_extra=None, timeout=120):
    env = {
        **os.environ,
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "OMP_NUM_THREADS": "1",
        **(env_extra or {}),
    }
    return subprocess.run(
        [*GPUPLAY, *args], capture_output=True, text=True, env=env, preexec_fn=preexec, timeout=timeout
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_real_out_of_memory_is_a_message_not_a_crash(tmp_path, backend):
    # 1.2 GB of float64 input cannot be allocated under a 2 GiB address-space limit
    # (torch's import alone maps ~1 GiB), though the machine has plenty free.
    res = run_cli(
        ["run", "elementwise", "-b", backend, "-s", "n=150000000", "--repeat", "1", "--format", "json"],
        tmp_path,
        preexec=limited(2.0 if backend == "numpy" else 3.0),
    )
    assert "Traceback" not in res.stderr + res.stdout
    assert res.returncode == 1
    assert "out of memory" in res.stderr
    # the next run in a fresh process works
    ok = run_cli(
        ["run", "elementwise", "-b", backend, "-s", "n=1000", "--repeat", "2", "--format", "json"], tmp_path
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["results"][0]["status"] == "ok"


def test_out_of_memory_in_the_app_leaves_it_usable(tmp_path, monkeypatch):
    from gpuplay.core.backends.numpy_backend import NumpyBackend

    real = NumpyBackend.from_host

    def no_memory(self, host, device, dtype):
        raise MemoryError("Unable to allocate 8.00 GiB for an array")

    monkeypatch.setattr(NumpyBackend, "from_host", no_memory)
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")  # the patch lives in this process
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    notes = record_notifications(app, monkeypatch)

    async def scenario():
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.session.live_result is not None)
            assert app.session.live_result.failure == "out-of-memory"
            assert any("out of memory" in n for n in notes)
            monkeypatch.setattr(NumpyBackend, "from_host", real)
            await pilot.press("r")
            await wait_until(pilot, lambda: app.session.live_result is not None)
            assert app.session.live_result.status == "ok"

    import asyncio

    asyncio.run(scenario())


@pytest.mark.compile
def test_compile_failure_without_a_cxx_compiler_runs_eager_and_says_so(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    env = {
        "CXX": str(bare / "no-such-c++"),
        "CC": str(bare / "no-such-cc"),
        "PATH": f"{bare}:{Path(sys.executable).parent}",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "ind"),
    }
    res = run_cli(
        [
            "run",
            "elementwise",
            "-b",
            "torch",
            "--compile",
            "default",
            "-s",
            "n=4096",
            "--repeat",
            "3",
            "--format",
            "json",
        ],
        tmp_path,
        env_extra=env,
        timeout=300,
    )
    assert "Traceback" not in res.stderr + res.stdout, res.stderr[-2000:]
    assert res.returncode == 0, res.stderr[-2000:]
    r = json.loads(res.stdout)["results"][0]
    assert r["status"] == "ok" and r["failure"] == "compile"
    assert any("torch.compile failed" in n and "EAGER" in n for n in r["notes"])
    assert r["conditions"]["compile"].startswith("failed: ran eager")
    assert r["check_ok"] is True


@pytest.mark.skipif(gpu_available(), reason="this machine has a GPU")
def test_cupy_installed_with_no_device_gives_cupys_own_error():
    pytest.importorskip("cupy")
    from gpuplay.core.backends import get_backend

    avail = get_backend("cupy").availability(timeout=60)
    assert not avail.ok
    assert "no CUDA device" in avail.reason and "CUDARuntimeError" in avail.reason
    r = run(RunSpec.make("matmul", {"n": 32}, backend="cupy", device="cuda:0"))
    assert r.status == "refused" and "CUDARuntimeError" in r.message
    assert run(RunSpec.make("matmul", {"n": 32}, repeat=1)).status == "ok"  # and the next run works


def test_cupy_not_installed_says_how_to_get_it(monkeypatch):
    import builtins

    from gpuplay.core.backends.cupy_backend import CupyBackend

    real_import = builtins.__import__

    def no_cupy(name, *a, **k):
        if name == "cupy" or name.startswith("cupy."):
            raise ImportError("No module named 'cupy'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_cupy)
    avail, devices = CupyBackend().probe(5)
    assert not avail.ok and "pip install cupy-cuda13x " in avail.reason and devices == []


def test_torch_cpu_allocator_failure_counts_as_out_of_memory():
    from gpuplay.core.backends.torch_backend import TorchBackend

    msg = (
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 68719476736 bytes. Error code 12 (Cannot allocate memory)"
    )
    assert TorchBackend().is_out_of_memory(RuntimeError(msg))
    assert not TorchBackend().is_out_of_memory(RuntimeError("shape mismatch"))
