"""Inference runtimes (core/runtimes) through the run's own path: built, timed, checked, refused.

The ONNX Runtime tests skip when onnxruntime is not installed (it is an optional extra); CI
installs it in a step of its own (.ci/run) and runs this file there.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from gpuplay.core import runtimes
from gpuplay.core.catalogue import levers
from gpuplay.core.catalogue.planner import check
from gpuplay.core.runner import run
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import get_workload
from tests.unit.gpu_fakes import FakeSessionOptions

SMALL = {"model": "block", "batch": 2, "seq": 8, "width": 32, "heads": 4}


def spec(runtime: str, **kw: object) -> RunSpec:
    params = get_workload("inference").resolve({**SMALL, "runtime": runtime})
    return RunSpec.make("inference", params, **{"backend": "torch", "warmup": 1, "repeat": 3, **kw})


@pytest.fixture(autouse=True)
def fresh_builds():
    runtimes.clear_cache()
    yield
    runtimes.clear_cache()


@pytest.mark.parametrize("runtime", ["eager", "torchscript", "onnxruntime"])
def test_each_runtime_matches_the_reference(runtime):
    if runtime == "onnxruntime":
        pytest.importorskip("onnxruntime")
    r = run(spec(runtime))
    assert r.status == "ok", r.message
    assert r.check_ok, f"{runtime}: error {r.error} > tolerance {r.tolerance}"
    assert len(r.samples) == 3
    if runtime == "eager":
        assert r.build_s is None
        return
    assert r.build_s is not None and r.build_s > 0  # measured apart, like a compile
    assert r.conditions["runtime"] == runtime
    assert any(n.startswith("runtime:") for n in r.notes)


def test_onnxruntime_says_its_session_options():
    pytest.importorskip("onnxruntime")
    r = run(spec("onnxruntime", threads=1))
    assert r.conditions["ort_providers"] == "CPUExecutionProvider"
    assert r.conditions["ort_graph_optimization"] == "ORT_ENABLE_ALL"
    assert r.conditions["ort_intra_op_threads"] == 1  # torch's threads, like for like
    # read back from the real session: its threads sleep between runs (spinning slowed the step
    # timed next, a paired partner's, 4x)
    assert r.conditions["ort_thread_spinning"] == "off"
    assert "ort_fallback" not in r.conditions


def test_a_cached_onnx_session_is_not_reused_at_another_thread_count():
    """The session's intra-op threads are torch's at build time: a later run with another `threads`
    (the live app's key, a sweep over threads) must not time the old session's thread count."""
    pytest.importorskip("onnxruntime")
    first = run(spec("onnxruntime", threads=2))
    assert first.conditions["ort_intra_op_threads"] == 2
    second = run(spec("onnxruntime", threads=1))
    assert second.status == "ok", second.message
    assert second.conditions["ort_intra_op_threads"] == 1
    assert second.conditions["threads"]["torch_intraop"] == 1
    third = run(spec("onnxruntime", threads=1))  # the same configuration again: reused, and said
    assert third.conditions["ort_intra_op_threads"] == 1 and any("reused" in n for n in third.notes)


def test_a_perturbed_onnx_output_fails_its_check(monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    real = ort.InferenceSession.run

    def wrong(self, *a, **k):
        out = real(self, *a, **k)
        return [out[0] * np.float32(1.001), *out[1:]]  # 0.1 %: far above float32's rounding

    monkeypatch.setattr(ort.InferenceSession, "run", wrong)
    r = run(spec("onnxruntime"))
    assert r.status == "ok" and r.check_ok is False, (r.error, r.tolerance)


def test_the_build_is_cached_per_configuration_and_said():
    first = run(spec("torchscript"))
    again = run(spec("torchscript"))
    assert not any("reused" in n for n in first.notes)
    assert any("reused the build of an earlier run" in n for n in again.notes)
    assert again.build_s == first.build_s
    other = run(spec("torchscript", dtype="float64"))  # another dtype: another build
    assert not any("reused" in n for n in other.notes) and other.check_ok


def test_tensorrt_is_refused_here_naming_the_gpu():
    verdict = check(spec("tensorrt"))
    assert isinstance(verdict, Refusal) and "NVIDIA GPU" in str(verdict)
    r = run(spec("tensorrt"))
    assert r.status == "refused" and "NVIDIA" in r.message


def test_a_missing_package_is_a_refusal_naming_the_extra(monkeypatch):
    # imported before the patch: imported under it, the module's own `installed` was the stand-in
    # from then on (undoing the patch put the stand-in back), and every later onnxruntime run in
    # the worker was refused as "not installed here"
    from gpuplay.core.runtimes import onnxruntime as ortmod

    monkeypatch.setattr(runtimes, "installed", lambda name: name != "onnxruntime")
    monkeypatch.setattr(ortmod, "installed", runtimes.installed)
    verdict = check(spec("onnxruntime"))
    assert (
        isinstance(verdict, Refusal)
        and "pip install onnxruntime onnx onnxscript" in str(verdict)
        and "onnxruntime" in str(verdict)
    )


def test_tensorrt_without_its_package_names_the_extra(monkeypatch):
    from gpuplay.core.runtimes import tensorrt

    monkeypatch.setattr(tensorrt, "installed", lambda name: False)
    assert "pip install torch-tensorrt" in (tensorrt.available("cuda:0") or "")


def test_a_runtime_needs_torch_and_the_lever_switches_to_it():
    numpy_spec = spec("onnxruntime").replace(backend="numpy")
    verdict = check(numpy_spec)
    assert isinstance(verdict, Refusal) and "backend torch" in str(verdict)
    assert levers.adjust(numpy_spec, "runtime").backend == "torch"
    assert levers.adjust(spec("torchscript"), "backend").params["runtime"] == "torchscript"
    back = levers.adjust(spec("torchscript").replace(backend="numpy"), "backend")
    assert back.params["runtime"] == "eager"  # NumPy has no torch model to hand a runtime


def test_compare_runs_the_runtimes_side_by_side():
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.studies.compare import plan_compare

    sc = load_scenarios().scenarios["inference"]
    specs, refused = plan_compare([sc], "quick", ["torch"], variants=("base", "torchscript", "tensorrt"))
    labels = [s.label() for s in specs]
    assert "torch cpu float32" in labels and "torch cpu float32 +torchscript" in labels
    assert any("+tensorrt" in s.label() and "NVIDIA" in str(why) for s, why in refused)
    # a runtime variant is a parameter of inference: other scenarios get no such row
    mm = load_scenarios().scenarios["matmul"]
    specs, refused = plan_compare([mm], "quick", ["torch"], variants=("base", "onnxruntime"))
    assert not any("+onnxruntime" in s.label() for s in specs) and not refused


# -- the CUDA path, against a fake onnxruntime that follows its documented API ----------------


class _Node:
    def __init__(self, name: str, shape: list[int]) -> None:
        self.name, self.shape = name, shape


class _Binding:
    def __init__(self, log: list) -> None:
        self.log = log

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        self.log.append(("input", name, device_type, device_id, np.dtype(element_type), shape, buffer_ptr))

    def bind_output(
        self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None
    ):
        self.log.append(("output", name, device_type, device_id, np.dtype(element_type), shape, buffer_ptr))


def fake_ort(used: list[str], log: list) -> types.ModuleType:
    ort = types.ModuleType("onnxruntime")
    ort.__version__ = "0.fake"
    ort.GraphOptimizationLevel = types.SimpleNamespace(ORT_ENABLE_ALL="ORT_ENABLE_ALL")
    ort.SessionOptions = FakeSessionOptions
    ort.get_available_providers = lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]

    class InferenceSession:
        def __init__(self, proto, opts, providers):
            log.append(("providers", providers))

        def get_providers(self):
            return used

        def get_inputs(self):
            return [_Node("x", [2, 8, 32])]

        def get_outputs(self):
            return [_Node("y", [2, 8, 32])]

        def io_binding(self):
            return _Binding(log)

        def run_with_iobinding(self, binding):
            log.append(("run",))

        def run(self, names, feeds):
            log.append(("cpu-run",))
            return [next(iter(feeds.values()))]

    ort.InferenceSession = InferenceSession
    return ort


@pytest.fixture
def on_fake_cuda(monkeypatch):
    import torch

    from gpuplay.core.runtimes import onnxruntime as ortmod

    monkeypatch.setattr(ortmod, "export", lambda model, example: b"onnx")  # the exporter is tested above

    def stream(handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(cuda_stream=handle, wait_stream=lambda other: None)

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: stream(0))  # the legacy default
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: stream(4242))

    def install(used: list[str]) -> list:
        log: list = []
        monkeypatch.setitem(__import__("sys").modules, "onnxruntime", fake_ort(used, log))
        return log

    return install


@pytest.mark.gpu_fake
def test_cuda_runs_with_io_binding_on_a_stream_of_its_own(on_fake_cuda):
    import torch

    from gpuplay.core.runtimes import onnxruntime as ortmod

    log = on_fake_cuda(["CUDAExecutionProvider", "CPUExecutionProvider"])
    x = torch.zeros((2, 8, 32))
    run_fn, build_s, conditions = ortmod.build(torch.nn.Identity(), x, "float32", "cuda:1")
    asked = log[0][1]
    assert asked[0] == (
        "CUDAExecutionProvider",
        {"device_id": 1, "use_tf32": "0", "has_user_compute_stream": "1", "user_compute_stream": "4242"},
    )
    assert asked[-1] == "CPUExecutionProvider"
    out = run_fn(x)
    run_fn(x)
    inputs = [e for e in log if e[0] == "input"]
    assert len(inputs) == 1  # the same tensor every step: bound once
    assert inputs[0][2:4] == ("cuda", 1) and inputs[0][6] == x.data_ptr()
    output = next(e for e in log if e[0] == "output")
    assert output[2:4] == ("cuda", 1) and output[6] == out.data_ptr()
    assert [e for e in log if e[0] == "run"] == [("run",), ("run",)]
    assert conditions["ort_providers"] == "CUDAExecutionProvider, CPUExecutionProvider"
    assert "ort_fallback" not in conditions


@pytest.mark.gpu_fake
def test_a_session_that_fell_back_to_the_cpu_is_said(on_fake_cuda):
    import torch

    from gpuplay.core.runtimes import onnxruntime as ortmod

    log = on_fake_cuda(["CPUExecutionProvider"])
    x = torch.ones((2, 8, 32))
    run_fn, _, conditions = ortmod.build(torch.nn.Identity(), x, "float32", "cuda:0")
    assert "CUDAExecutionProvider asked" in conditions["ort_fallback"]
    assert "CPUExecutionProvider" in conditions["ort_fallback"]
    assert any("fell back" in n for n in ortmod.notes("cuda:0", conditions))
    assert torch.equal(run_fn(x), x) and ("cpu-run",) in log  # timed as what it is: host copies and all


@pytest.mark.gpu_fake
def test_the_cpu_package_on_a_gpu_is_refused_naming_onnx_gpu(monkeypatch):
    from gpuplay.core.runtimes import onnxruntime as ortmod

    monkeypatch.setattr(ortmod, "installed", lambda name: True)
    monkeypatch.setattr(ortmod, "_gpu_package", lambda: False)
    why = ortmod.available("cuda:0")
    assert why and "pip install onnxruntime-gpu" in why and "CUDAExecutionProvider" in why
    monkeypatch.setattr(ortmod, "_gpu_package", lambda: True)
    assert ortmod.available("cuda:0") is None


def test_the_numpy_baseline_of_a_runtime_runs_the_forward_pass_by_hand():
    from gpuplay.core.studies.compare import baseline_spec

    base = baseline_spec(spec("onnxruntime"))
    assert base.backend == "numpy" and base.params["runtime"] == "eager"
    assert not isinstance(check(base), Refusal)


def test_the_runtimes_deck_loads_with_a_step_per_runtime():
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.reports.decks import load_deck, resolve_deck_path

    deck = load_deck(resolve_deck_path("inference-runtimes"), load_scenarios())
    runtimes_ = [(s.spec.compile, s.spec.params["runtime"], s.spec.device) for s in deck.steps]
    assert runtimes_ == [("off", "eager", "cpu"), ("default", "eager", "cpu"),
                         ("off", "onnxruntime", "cpu"), ("off", "tensorrt", "cuda")]  # fmt: skip


def test_one_build_per_run_the_cost_probes_run_eager():
    pytest.importorskip("onnxruntime")
    r = run(spec("onnxruntime").replace(params={**SMALL, "runtime": "onnxruntime", "batch": 16}))
    assert r.status == "ok" and r.check_ok
    assert [k[2] for k in runtimes._cache.data] == [(16, 8, 32)]  # no build at a probe's batch


def test_the_python_api_switches_to_the_backend_a_runtime_needs_as_the_cli_does(monkeypatch):
    """gpuplay.run without backend= runs runtime=torchscript on torch (core.scenarios.on_needed_backend,
    shared with `gpuplay run`); a backend named explicitly stays, and is refused with the reason."""
    import gpuplay

    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")
    params = {**SMALL, "runtime": "torchscript"}
    r = gpuplay.run("inference", params=params, budget_s=0.05, baseline=False)
    assert r.to_dict()["result"]["spec"]["backend"] == "torch" and r.check_ok is True
    with pytest.raises(gpuplay.Refused, match="backend torch"):
        gpuplay.run("inference", backend="numpy", params=params, baseline=False)
    # a workload that needs no particular backend keeps NumPy, the API's default
    assert (
        gpuplay.run("matmul", params={"n": 32}, budget_s=0.02, baseline=False).to_dict()["result"]["spec"][
            "backend"
        ]
        == "numpy"
    )
