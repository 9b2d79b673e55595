"""Doubles of ONNX Runtime and Torch-TensorRT for a simulated process, recording what gpuplay asks
of them: the session's options and providers (with their options), the I/O bindings, TensorRT's
compile arguments, each as a ledger line ("ort_session", "ort_binding", "trt_compile").

They are packages in tests/gpu_sim/runtimes_site/, on PYTHONPATH only where `sim_env(...,
runtimes=True)` puts them (with an onnxruntime-gpu distribution's metadata, as gpuplay reads it to
tell a GPU build). They run the model with torch: `torch.onnx.export` (patched while they are
present) returns a token naming the model, and the session runs that model. Figures are the
simulated device's; a run says `onnxruntime 1.22.0+gpuplay.sim` in its conditions.
"""

from __future__ import annotations

import itertools
import os
from types import SimpleNamespace
from typing import Any

from tests.gpu_sim.device import KIND_ENV, ledger

PROVIDERS = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
TOKEN = b"gpuplay-sim-onnx:"
_models: dict[int, tuple[Any, Any]] = {}
_ids = itertools.count(1)


def require_sim(name: str) -> None:
    if not os.environ.get(KIND_ENV):
        raise ImportError(f"{name}: this is a stand-in of gpuplay's simulated-GPU tests, usable only there")


# -- the exporter --------------------------------------------------------------------------
def onnx_export(model: Any, args: Any = (), f: Any = None, **kwargs: Any) -> Any:
    """torch.onnx.export as the dynamo exporter answers: a program whose model_proto serialises
    to bytes (here a token naming the model, which the session runs)."""
    n = next(_ids)
    example = args[0] if isinstance(args, tuple) and args else args
    _models[n] = (model, example)
    ledger("onnx_export", model=type(model).__name__, dynamo=kwargs.get("dynamo"))
    proto = SimpleNamespace(SerializeToString=lambda: TOKEN + str(n).encode())
    return SimpleNamespace(model_proto=proto)


# -- onnxruntime -----------------------------------------------------------------------------
class GraphOptimizationLevel:
    ORT_DISABLE_ALL, ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED, ORT_ENABLE_ALL = 0, 1, 2, 99


class SessionOptions:
    """onnxruntime.SessionOptions: every attribute set is kept (and recorded with the session)."""

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.configs: dict[str, str] = {}

    def add_session_config_entry(self, key: str, value: str) -> None:
        self.configs[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self.configs:  # onnxruntime's own words for a key never set
            raise RuntimeError(f"SessionOptions does not have configuration with key: {key}")
        return self.configs[key]


def get_available_providers() -> list[str]:
    return list(PROVIDERS)


def get_device() -> str:
    return "GPU"


def _names(providers: Any) -> list[str]:
    return [p[0] if isinstance(p, tuple | list) else str(p) for p in providers or []]


def _torch() -> Any:
    import torch

    return torch


class _IOBinding:
    def __init__(self) -> None:
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}

    def bind_input(
        self, name: str, device_type: str, device_id: int, element_type: Any, shape: Any, buffer_ptr: int
    ) -> None:
        self.inputs[name] = buffer_ptr
        ledger("ort_binding", io="input", name=name, device_type=device_type, device_id=device_id,
               element_type=str(element_type), shape=list(shape))  # fmt: skip

    def bind_output(self, name: str, device_type: str = "cpu", device_id: int = 0, element_type: Any = None,
                    shape: Any = None, buffer_ptr: int | None = None) -> None:  # fmt: skip
        self.outputs[name] = buffer_ptr
        ledger("ort_binding", io="output", name=name, device_type=device_type, device_id=device_id,
               element_type=str(element_type), shape=list(shape or ()))  # fmt: skip


class InferenceSession:
    """onnxruntime.InferenceSession over a model "exported" by `onnx_export`."""

    def __init__(self, model: Any, sess_options: Any = None, providers: Any = None,
                 provider_options: Any = None, **kwargs: Any) -> None:  # fmt: skip
        data = bytes(model) if isinstance(model, bytes | bytearray) else b""
        if not data.startswith(TOKEN):
            raise RuntimeError("[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : not a model of the simulation")
        self.model, self.example = _models[int(data[len(TOKEN) :])]
        asked = _names(providers) or ["CPUExecutionProvider"]
        self.providers = [p for p in asked if p in PROVIDERS]
        self.sess_options = sess_options if sess_options is not None else SessionOptions()
        opts = vars(sess_options) if sess_options is not None else {}
        ledger("ort_session", providers=[list(p) if isinstance(p, tuple) else p for p in providers or []],
               provider_options=provider_options, session_options=opts)  # fmt: skip
        torch = _torch()
        with torch.no_grad():
            out = self.model(self.example)
        self.out_shape = list(out.shape)

    def get_providers(self) -> list[str]:
        return list(self.providers)

    def get_session_options(self) -> Any:
        return self.sess_options

    def get_inputs(self) -> list[Any]:
        return [SimpleNamespace(name="input", shape=list(self.example.shape), type="tensor(float)")]

    def get_outputs(self) -> list[Any]:
        return [SimpleNamespace(name="output", shape=self.out_shape, type="tensor(float)")]

    def run(self, output_names: Any, input_feed: dict[str, Any], run_options: Any = None) -> list[Any]:
        torch = _torch()
        x = torch.from_numpy(next(iter(input_feed.values())))
        with torch.no_grad():
            out = self.model(x)
        return [out.detach().cpu().numpy()]

    def io_binding(self) -> _IOBinding:
        return _IOBinding()

    def run_with_iobinding(self, binding: _IOBinding, run_options: Any = None) -> None:
        from tests.gpu_sim.simtorch import tensor_at

        torch = _torch()
        x = tensor_at(next(iter(binding.inputs.values())))
        out = tensor_at(next(iter(binding.outputs.values())))
        with torch.no_grad():
            out.copy_(self.model(x))


# -- torch_tensorrt ---------------------------------------------------------------------------
def trt_compile(module: Any, ir: str = "default", inputs: Any = None, enabled_precisions: Any = None,
                **kwargs: Any) -> Any:  # fmt: skip
    """torch_tensorrt.compile: records its arguments; the "engine" is the module itself."""
    ledger("trt_compile", ir=ir, inputs=[list(getattr(i, "shape", ())) for i in inputs or []],
           enabled_precisions=sorted(str(p) for p in enabled_precisions or ()),
           options={k: repr(v)[:200] for k, v in kwargs.items()})  # fmt: skip
    return module
