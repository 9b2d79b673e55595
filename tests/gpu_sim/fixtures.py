"""The `sim_h100` fixtures (imported by tests/conftest.py, so any test may use them): the test's
environment simulates an H100 for every process it starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gpu_sim import RUNTIMES_ENV, read_ledger, sim_env


@dataclass
class SimSession:
    """What a test holds of its simulated device: the environment and the ledger."""

    env: dict[str, str]
    ledger_path: Path

    def ledger(self, event: str | None = None) -> list[dict[str, Any]]:
        return read_ledger(self.ledger_path, event)


def _simulate(tmp_path: Path, monkeypatch: Any, runtimes: bool) -> SimSession:
    env = sim_env("h100", tmp_path, runtimes=runtimes)
    for key in ("PYTHONPATH", "GPUPLAY_TEST_SIM", "GPUPLAY_TEST_SIM_LEDGER", "GPUPLAY_STATE_DIR",
                "GPUPLAY_CONFIG_DIR", "TORCHINDUCTOR_CACHE_DIR", RUNTIMES_ENV):  # fmt: skip
        if key in env:
            monkeypatch.setenv(key, env[key])
        else:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("GPUPLAY_IN_PROCESS", raising=False)
    return SimSession(env, Path(env["GPUPLAY_TEST_SIM_LEDGER"]))


@pytest.fixture
def sim_h100_runtimes(tmp_path, monkeypatch):
    """As `sim_h100`, with the ONNX Runtime and Torch-TensorRT doubles (simruntimes.py) present."""
    yield _simulate(tmp_path, monkeypatch, runtimes=True)
    from gpuplay.core.engine.client import shutdown_shared

    shutdown_shared()


@pytest.fixture
def sim_h100(tmp_path, monkeypatch):
    """Set this test's environment to simulate an H100 (so an engine that `gpuplay.run` starts, or a
    `gpuplay` subprocess given `sim.env`, sees cuda:0 as one); yields the SimSession."""
    session = _simulate(tmp_path, monkeypatch, runtimes=False)
    yield session
    from gpuplay.core.engine.client import shutdown_shared

    shutdown_shared()  # the engine this test started simulates: no later test may adopt it
