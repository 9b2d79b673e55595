"""TF32 on AMD MI300 is TF32: ATen's allowTF32CuBLAS on ROCm needs HIPBLASLT_ALLOW_TF32=1 in the
process's environment (before hipBLASLt's first handle), so the engine process starts with it,
a run says it in its conditions, and a value that turns it off refuses --tf32 with the reason."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpuplay.core.spec import Refusal, RunSpec
from tests.unit.gpu_fakes import FakeAmdGpu, FakeAmdsmi, install_rocm
from tests.unit.hw_helpers import reprobe_torch

pytestmark = pytest.mark.gpu_fake
ENV = "HIPBLASLT_ALLOW_TF32"
MI300X = FakeAmdGpu(
    "AMD Instinct MI300X", "gfx942:sramecc+:xnack-", bus=0xC1, uuid="4cff74a1-0000-1000-80aa-000000000001"
)


def _environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/environ")
@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("0", "0")])
def test_the_engine_process_starts_with_hipblaslt_tf32_allowed_unless_the_user_set_it(
    monkeypatch, given, expected
):
    from gpuplay.core.engine import process

    if given is None:
        monkeypatch.delenv(ENV, raising=False)
    else:
        monkeypatch.setenv(ENV, given)
    spawned = process.spawn()
    try:
        assert _environ_of(spawned.proc.pid).get(ENV) == expected  # from its first instruction
    finally:
        spawned.kill()
    assert os.environ.get(ENV) == given  # the front end's own environment is left alone


def _mi300(monkeypatch):
    install_rocm(monkeypatch, [MI300X], FakeAmdsmi([MI300X]))
    reprobe_torch(monkeypatch)
    return RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0", tf32=True)


def test_a_tf32_run_on_mi300_says_hipblaslt_allows_it(monkeypatch):
    from gpuplay.core.runner.plan import conditions, plan_run

    monkeypatch.setenv(ENV, "1")  # as the engine process has it (above)
    spec = _mi300(monkeypatch)
    cond = conditions(plan_run(spec))
    assert cond["hipblaslt_allow_tf32"].startswith("HIPBLASLT_ALLOW_TF32=1 in the engine's environment")
    off = conditions(plan_run(RunSpec.make("matmul", {"n": 64}, backend="torch", device="cuda:0")))
    assert "hipblaslt_allow_tf32" not in off  # said where TF32 was asked


def test_tf32_on_mi300_is_refused_where_the_environment_turns_hipblaslt_tf32_off(monkeypatch):
    from gpuplay.core.catalogue import planner

    monkeypatch.setenv(ENV, "0")
    refused = planner.check(_mi300(monkeypatch))
    assert isinstance(refused, Refusal)
    assert "HIPBLASLT_ALLOW_TF32=1" in refused.reason and "'0'" in refused.reason
    assert "unset HIPBLASLT_ALLOW_TF32" in refused.hint and "turn TF32 off" in refused.hint
    monkeypatch.delenv(ENV)  # unset: the engine sets it, so the plan stands
    assert not isinstance(planner.check(_mi300(monkeypatch)), Refusal)


def test_an_in_process_engine_sets_it_as_an_engine_process_does(monkeypatch):
    from gpuplay.core.engine.inprocess import InProcessEngine

    monkeypatch.delenv(ENV, raising=False)
    engine = InProcessEngine()
    monkeypatch.setattr(engine, "_probe", lambda: None)
    engine.start()
    assert os.environ.get(ENV) == "1"


def test_the_spawn_names_the_same_variable_as_the_amd_glue():
    """engine/process.py names HIPBLASLT_ALLOW_TF32 itself (a spawn imports no AMD glue): the same."""
    from gpuplay.core.engine import process
    from gpuplay.core.hw import amd

    assert process.HIPBLASLT_TF32 == amd.HIPBLASLT_TF32
    assert process.amd_env({}) == amd.engine_env({}) and process.amd_env({"HIPBLASLT_ALLOW_TF32": "0"}) == {}
