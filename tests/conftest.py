from __future__ import annotations

import os
import threading

import pytest

# The simulated GPU's fixtures (tests/gpu_sim, docs/testing-gpu-sim.md), for any test to use.
from tests.gpu_sim.fixtures import sim_h100, sim_h100_runtimes  # noqa: F401

# Keep torch's OpenMP pool small on the 2-core CI machine; tests measure behaviour, not speed.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def backends_probe_here():
    """A command run in this process (CliRunner, the Python API) hands its backends' questions to
    the engine process and marks those it did not ask about as the engine's, pending: right for that
    command's process, wrong for the next test, which measures in this process and would read
    "PyTorch is still being probed" forever. Each test ends with backends that probe here again.
    Set up before `isolated_dirs` (and its monkeypatch), so this runs after a test's patches of the
    backend registry are undone."""
    yield
    from gpuplay.core.engine.protocol import forget_engine_probe

    forget_engine_probe()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Session logs and config go to a temporary folder, never the user's."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GPUPLAY_CONFIG_DIR", str(tmp_path / "config"))
    # torch.compile's on-disk caches (inductor's FX graph and autotuning caches) outlive a run:
    # a machine that compiled the same graph before (an earlier CI run, a developer) would read a
    # 40 ms cache hit where a test times a compile. Each test gets its own, empty.
    # Beside tmp_path, not in it: tests that list what a command left in their folder see none of it.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-inductor"))
    yield


def gpu_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "compile" in item.keywords:
            item.add_marker(pytest.mark.slow)  # a cold torch.compile alone takes ~16 s on 2 cores
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def no_leaked_threads():
    before = set(threading.enumerate())
    yield
    leaked = [
        t for t in threading.enumerate() if t not in before and t.is_alive() and t.name.startswith("gpuplay")
    ]
    assert not leaked, f"threads left running: {leaked}"
