"""What ONNX Runtime and TensorRT are told on a GPU: the run's TF32 lever, the stream ORT runs on,
and the CUDA graphs a runtime torch cannot capture, against fakes of their documented APIs.

ORT's CUDA provider options (use_tf32 default 1; user_compute_stream parsed as an address, 0 read
as none given: has_user_compute_stream follows it) and torch_tensorrt.compile's disable_tf32
(default False) are the libraries' own; the fakes record what they are given.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from gpuplay.core import runtimes
from gpuplay.core.backends.torch_backend import fp32_matmul_precision
from gpuplay.core.catalogue.planner import check
from gpuplay.core.spec import Refusal, RunSpec
from gpuplay.core.workloads import get_workload
from tests.unit.gpu_fakes import FakeSessionOptions

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu_fake
SMALL = {"model": "block", "batch": 2, "seq": 8, "width": 32, "heads": 4}


@pytest.fixture(autouse=True)
def fresh_builds():
    runtimes.clear_cache()
    yield
    runtimes.clear_cache()


class Streams:
    """torch.cuda's streams as the ORT path uses them: torch's current stream is the legacy
    default one (handle 0); a new Stream gets a handle of its own; waits are logged in order."""

    def __init__(self, log: list) -> None:
        self.log, self.handles = log, iter(range(0x5A000, 0x5B000, 0x100))
        self.default = self.make(0, "torch")

    def make(self, handle: int, name: str) -> types.SimpleNamespace:
        s = types.SimpleNamespace(cuda_stream=handle, name=name)
        s.wait_stream = lambda other: self.log.append(("wait", s.name, other.name))
        return s

    def Stream(self, device=None, **_):  # noqa: N802 - torch's name
        return self.make(next(self.handles), "ort")

    def current_stream(self, device=None):
        return self.default


class _Node:
    def __init__(self, name: str, shape: list[int]) -> None:
        self.name, self.shape = name, shape


def fake_ort(log: list, available: list[str]) -> types.ModuleType:
    """onnxruntime's Python API as the CUDA path calls it (InferenceSession with provider
    options, io_binding, run_with_iobinding), recording the options given."""
    ort = types.ModuleType("onnxruntime")
    ort.__version__ = "0.fake"
    ort.GraphOptimizationLevel = types.SimpleNamespace(ORT_ENABLE_ALL="ORT_ENABLE_ALL")
    ort.SessionOptions = FakeSessionOptions
    ort.get_available_providers = lambda: [*available, "CPUExecutionProvider"]

    class Binding:
        def bind_input(self, *a):
            log.append(("bind_input",))

        def bind_output(self, *a):
            log.append(("bind_output",))

    class InferenceSession:
        def __init__(self, proto, opts, providers):
            self.asked = providers
            log.append(("providers", providers))

        def get_providers(self):
            return [p[0] if isinstance(p, tuple) else p for p in self.asked]

        def get_inputs(self):
            return [_Node("x", [2, 8, 32])]

        def get_outputs(self):
            return [_Node("y", [2, 8, 32])]

        def io_binding(self):
            return Binding()

        def run_with_iobinding(self, binding):
            log.append(("run",))

    ort.InferenceSession = InferenceSession
    return ort


@pytest.fixture
def ort_on_cuda(monkeypatch):
    from gpuplay.core.runtimes import onnxruntime as ortmod

    log: list = []
    streams = Streams(log)
    monkeypatch.setattr(ortmod, "export", lambda model, example: b"onnx")
    monkeypatch.setattr(torch.cuda, "Stream", streams.Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", streams.current_stream)
    monkeypatch.setattr(ortmod, "available", lambda device: None)

    def install(available: list[str]) -> list:
        monkeypatch.setitem(sys.modules, "onnxruntime", fake_ort(log, available))
        for package in ("onnx", "onnxscript"):  # installed (the engine imports them before a build)
            monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
        return log

    return install


def build(name: str, tf32: bool, device: str = "cuda:1") -> runtimes.Built:
    """The runtime built as the inference workload's prepare builds it, inside the run's
    precision setting (TorchBackend.configured sets torch's flags from the tf32 lever)."""
    x = torch.zeros((2, 8, 32))
    with fp32_matmul_precision(torch, tf32):
        return runtimes.build(name, ("block", 32, 4), torch.nn.Identity, x, "float32", device)


def cuda_options(log: list) -> dict:
    asked = next(e for e in log if e[0] == "providers")[1]
    return next(
        opts for name, opts in (p for p in asked if isinstance(p, tuple)) if name == "CUDAExecutionProvider"
    )


# -- 1. TF32 reaches ONNX Runtime and TensorRT ---------------------------------------------------
@pytest.mark.parametrize("tf32", [False, True])
def test_the_tf32_lever_reaches_onnx_runtimes_cuda_provider(ort_on_cuda, tf32):
    log = ort_on_cuda(["TensorrtExecutionProvider", "CUDAExecutionProvider"])
    built = build("onnxruntime", tf32)
    assert cuda_options(log)["use_tf32"] == ("1" if tf32 else "0")  # ORT's default is 1: always said
    names = [p[0] if isinstance(p, tuple) else p for p in log[0][1]]
    # TensorRT has no TF32 switch in ORT: asked only where TF32 is allowed
    assert ("TensorrtExecutionProvider" in names) is tf32
    assert built.conditions["ort_tf32"].startswith("on" if tf32 else "off")


def test_a_float16_run_still_asks_for_the_tensorrt_provider(ort_on_cuda):
    log = ort_on_cuda(["TensorrtExecutionProvider", "CUDAExecutionProvider"])
    x = torch.zeros((2, 8, 32), dtype=torch.float16)
    runtimes.build("onnxruntime", ("block", 32, 4), torch.nn.Identity, x, "float16", "cuda:0")
    assert log[0][1][0][0] == "TensorrtExecutionProvider"  # TF32 is no question for float16


def test_a_tf32_run_builds_its_own_session(ort_on_cuda):
    log = ort_on_cuda(["CUDAExecutionProvider"])
    build("onnxruntime", False)
    again = build("onnxruntime", True)
    assert not again.cached and [e[0] for e in log].count("providers") == 2


@pytest.mark.parametrize("tf32", [False, True])
def test_the_tf32_lever_reaches_torch_tensorrt(monkeypatch, tf32):
    from gpuplay.core.runtimes import tensorrt

    given: dict = {}
    trt = types.ModuleType("torch_tensorrt")
    trt.__version__ = "0.fake"
    trt.compile = lambda module, **kw: (given.update(kw), module)[1]
    monkeypatch.setitem(sys.modules, "torch_tensorrt", trt)
    monkeypatch.setattr(tensorrt, "available", lambda device: None)
    built = build("tensorrt", tf32, "cuda:0")
    assert given["disable_tf32"] is (not tf32)  # torch_tensorrt's default, False, is TF32
    assert given["enabled_precisions"] == {torch.float32}
    assert built.conditions["trt_tf32"].startswith("on" if tf32 else "off")


# -- 6. ORT's stream is one the step's events see -------------------------------------------------
def test_onnx_runtime_runs_on_a_stream_of_its_own_joined_to_the_steps(ort_on_cuda):
    log = ort_on_cuda(["CUDAExecutionProvider"])
    built = build("onnxruntime", False)
    opts = cuda_options(log)
    # not torch's current stream: its handle is 0, which ORT reads as none given
    assert opts["user_compute_stream"] not in ("0", "") and int(opts["user_compute_stream"]) > 0
    assert opts["has_user_compute_stream"] == "1"
    log.clear()
    x = torch.zeros((2, 8, 32))
    built.run(x)
    steps = [e for e in log if e[0] != "bind_input"]
    # ORT's stream waits for torch's (the input), and torch's for ORT's (the end event after it)
    assert steps == [("wait", "ort", "torch"), ("run",), ("wait", "torch", "ort")]
    assert "its own CUDA stream" in built.conditions["ort_stream"]


def test_cuda_graphs_are_refused_for_onnx_runtime_with_the_reason_and_what_to_do(monkeypatch):
    from gpuplay.core.backends import get_backend
    from gpuplay.core.backends.base import Availability, DeviceInfo
    from gpuplay.core.catalogue import planner
    from gpuplay.core.runtimes import onnxruntime as ortmod

    backend = get_backend("torch")
    devices = [DeviceInfo("cpu", "cpu"), DeviceInfo("cuda:0", "NVIDIA H100 80GB HBM3")]
    monkeypatch.setattr(backend, "probe", lambda timeout=None: (Availability(True), devices))
    monkeypatch.setattr(planner, "device_refusal", lambda *a, **k: None)
    monkeypatch.setattr(ortmod, "available", lambda device: None)

    def spec(runtime: str) -> RunSpec:
        p = get_workload("inference").resolve({**SMALL, "runtime": runtime})
        return RunSpec.make("inference", p, backend="torch", device="cuda:0", cuda_graphs=True)

    refused = check(spec("onnxruntime"))
    assert isinstance(refused, Refusal)
    assert "runtime=onnxruntime cannot be captured in a CUDA graph" in refused.reason
    assert "--graphs off" in refused.hint and "eager" in refused.hint
    assert not isinstance(check(spec("torchscript")), Refusal)
    assert not isinstance(check(RunSpec.make("inference", get_workload("inference").resolve({**SMALL, "runtime": "onnxruntime"}),
                                             backend="torch", device="cuda:0")), Refusal)  # fmt: skip


def test_off_cuda_onnx_runtime_is_not_told_tf32_and_runs_as_before(ort_on_cuda):
    log = ort_on_cuda([])
    x = torch.zeros((2, 8, 32))
    built = runtimes.build("onnxruntime", ("block", 32, 4), torch.nn.Identity, x, "float32", "cpu")
    assert log[0][1] == ["CPUExecutionProvider"] and "ort_tf32" not in built.conditions
    assert np.isfinite(built.build_s)
