"""The runner's parts: the plan resolved once, the timed loop's frees, inputs made as a user's are."""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

import gpuplay.core.workloads as workloads_module
from gpuplay.core.backends import get_backend
from gpuplay.core.backends.numpy_backend import NumpyBackend
from gpuplay.core.catalogue import planner
from gpuplay.core.runner import RunPlan, device_inputs, memory_shortfall, plan_run, run, timed_loop
from gpuplay.core.runner import measure as measure_module
from gpuplay.core.runner import steps as steps_module
from gpuplay.core.spec import Refusal, RunSpec


class Output:
    """A step output that reports when it is freed."""

    def __init__(self, events: list[str], i: int) -> None:
        self.events, self.i = events, i

    def __del__(self) -> None:
        self.events.append(f"free {self.i}")


def test_a_run_resolves_its_workload_and_compute_dtype_once(monkeypatch):
    calls = {"registry": 0, "compute_dtype": 0}
    # a built-in workload is looked up by name (its module imported at the first lookup)
    real_registry, real_cdtype = workloads_module._builtin, planner.compute_dtype

    def counting_registry(name):
        calls["registry"] += 1
        return real_registry(name)

    def counting_cdtype(*a, **k):
        calls["compute_dtype"] += 1
        return real_cdtype(*a, **k)

    monkeypatch.setattr(workloads_module, "_builtin", counting_registry)
    monkeypatch.setattr(planner, "compute_dtype", counting_cdtype)
    r = run(RunSpec.make("matmul", {"n": 32}, backend="torch", amp="bf16", warmup=1, repeat=2))
    assert r.status == "ok", r.message
    assert calls == {"registry": 1, "compute_dtype": 1}
    assert r.compute_dtype == "bfloat16"


def test_resolve_gives_a_plan_with_cost_or_the_refusal():
    plan = plan_run(RunSpec.make("heat", {"n": 64, "steps": 10}))
    assert isinstance(plan, RunPlan)
    assert plan.backend is get_backend("numpy") and plan.compute_dtype == "float32"
    assert plan.flops == 7.0 * 64**2 * 10 and plan.size == "64² × 10 steps"
    small = plan.scaled(1 / 4)
    assert small.params["n"] == 16 and small.compute_dtype == plan.compute_dtype
    refused = plan_run(RunSpec.make("matmul", {"n": 32}, backend="numpy", amp="fp16"))
    assert isinstance(refused, Refusal) and "PyTorch" in str(refused)


def test_timed_loop_frees_each_output_inside_its_own_interval():
    events: list[str] = []
    made = iter(range(100))

    def fn():
        i = next(made)
        events.append(f"call {i}")
        return Output(events, i)

    def timer(step):
        events.append("start")
        out = step()
        events.append("stop")
        return 0.0, out

    def on_sample(phase, dt):
        events.append("callback")

    timed_loop(fn, timer, phase="timed", count=2, cancel=threading.Event(), on_sample=on_sample)
    assert events == [
        "start", "call 0", "free 0", "stop", "callback",
        "start", "call 1", "free 1", "stop", "callback",
    ]  # fmt: skip


def test_no_warmup_output_is_alive_when_the_timed_loop_starts(monkeypatch):
    outputs: list[weakref.ref] = []
    alive_at_timed: list[int] = []
    real_build, real_loop = steps_module.build_step, measure_module.timed_loop

    def tracking_build(*a, **k):
        step = real_build(*a, **k)

        def tracked():
            out = step()
            outputs.append(weakref.ref(out))
            return out

        return tracked

    def spying_loop(fn, timer, *, phase, **kw):
        if phase == "timed":
            alive_at_timed.append(sum(ref() is not None for ref in outputs))
        return real_loop(fn, timer, phase=phase, **kw)

    monkeypatch.setattr(steps_module, "build_step", tracking_build)
    monkeypatch.setattr(measure_module, "timed_loop", spying_loop)
    r = run(RunSpec.make("matmul", {"n": 64}, warmup=3, repeat=3))
    assert r.status == "ok", r.message
    assert len(outputs) >= 3 + 3 + 1  # warm-up, timed, and the check's own call
    assert alive_at_timed == [0]
    assert r.check_ok


def test_inputs_are_converted_and_the_float64_originals_freed(monkeypatch):
    plan = plan_run(RunSpec.make("matmul", {"n": 16}))
    made: list[weakref.ref] = []
    real_inputs = plan.workload.inputs

    def tracked_inputs(p, rng):
        arrays = real_inputs(p, rng)
        made.extend(weakref.ref(a) for a in arrays)
        return arrays

    monkeypatch.setattr(plan.workload, "inputs", tracked_inputs)
    args = device_inputs(plan)
    assert [a.dtype for a in args] == [np.float32, np.float32]
    assert made and all(ref() is None for ref in made)


def test_page_faults_per_step_are_recorded():
    r = run(RunSpec.make("elementwise", {"n": 1000}, warmup=1, repeat=5))
    assert r.status == "ok", r.message
    assert r.conditions["page_faults_per_step"] >= 0
    assert not any("page faults" in n for n in r.notes)


def test_a_step_that_faults_heavily_says_so(monkeypatch):
    counts = iter([0, 5 * 2000])  # getrusage before and after the timed loop
    monkeypatch.setattr(measure_module, "_minor_faults", lambda: next(counts))
    r = run(RunSpec.make("elementwise", {"n": 1000}, warmup=1, repeat=5))
    assert r.conditions["page_faults_per_step"] == 2000
    assert any("2,000 page faults per step" in n for n in r.notes)


class SmallDevice(NumpyBackend):
    def device_memory_free(self, device):
        return 1000


def test_memory_check_asks_the_backend_for_free_device_memory():
    spec = RunSpec.make("matmul", {"n": 256}, device="cuda:0")
    w = workloads_module.get_workload("matmul")
    plan = RunPlan(spec, w, SmallDevice(), "float32", w.resolve({"n": 256}))
    message = memory_shortfall(plan)
    assert "on cuda:0" in message and "choose a smaller size" in message


def test_library_features_sit_behind_the_backend_interface():
    numpy = get_backend("numpy")
    with pytest.raises(NotImplementedError, match="NumPy has no compiler"):
        numpy.compile(lambda x: x, "default")
    torch = pytest.importorskip("torch")
    matmul = get_backend("torch").autocast(lambda a, b: a @ b, "cpu", "bfloat16")
    assert matmul(torch.ones(4, 4), torch.ones(4, 4)).dtype == torch.bfloat16


def test_a_step_is_prepared_in_one_order_for_runs_and_profiles(monkeypatch):
    """Inputs ("setup"), the first compiling call, warm-up, in that order; a profile prepares its
    step through the same function as a run."""
    from gpuplay.core.runner import steps as steps_module
    from gpuplay.core.runner.profile import profile_spec
    from gpuplay.core.runner.steps import prepare_step

    plan = plan_run(RunSpec.make("matmul", {"n": 8}, backend="torch", compile="default"))
    assert isinstance(plan, RunPlan)
    events: list[str] = []
    prepared = prepare_step(
        plan,
        lambda step: events.append("warm-up ran") or step(),
        first_call=lambda step, eager: events.append("first call") or eager(),
        on_phase=events.append,
    )
    assert events == ["setup", "compile", "first call", "warmup", "warm-up ran"]
    assert prepared.setup_s >= 0 and tuple(prepared.step().shape) == (8, 8)

    eager = plan_run(RunSpec.make("matmul", {"n": 8}, backend="torch"))
    events.clear()
    prepare_step(eager, lambda step: None, first_call=lambda s, e: events.append("first call") or s,
                 on_phase=events.append)  # fmt: skip
    assert events == ["setup", "warmup"]  # nothing compiles: no first call

    prepared_for: list[str] = []
    real = steps_module.prepare_step

    def spy(plan, *a, **k):
        prepared_for.append(plan.spec.label())
        return real(plan, *a, **k)

    monkeypatch.setattr(steps_module, "prepare_step", spy)
    data = profile_spec(RunSpec.make("matmul", {"n": 8}, backend="torch"), steps=1)
    assert data["status"] == "ok" and prepared_for == ["torch cpu float32"]
    assert data["warmup_s"] >= 0
