"""Model inference: a small MLP and a pre-norm transformer block, forward pass only.

PyTorch runs torch.nn modules with the autograd mode as a lever (`grad`: the
graph is recorded for a backward that never comes; `no_grad`; `inference`:
torch.inference_mode) and, optionally, torchao's dynamic INT8 quantization of
the Linear layers. NumPy and CuPy run the same forward pass with the same
weights written out by hand. The reference is the float32 NumPy forward: the
precision a model ships in, so what AMP and INT8 cost is the error shown.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core import runtimes
from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.attention import attention
from gpuplay.core.workloads.base import EPS, Param, SetupReport, Workload
from gpuplay.core.workloads.fused import gelu_ops

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

INT8_TOLERANCE = 5e-2  # dynamic INT8 activations and weights: ~1e-2 relative error is typical


def _layer_norm(xp: Any, x: Any) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / xp.sqrt(var + 1e-5)


def mlp_forward(xp: Any, w: Mapping[str, Any], x: Any) -> Any:
    return gelu_ops(xp, x @ w["fc1_w"].T + w["fc1_b"]) @ w["fc2_w"].T + w["fc2_b"]


def block_forward(xp: Any, w: Mapping[str, Any], x: Any) -> Any:
    # Pre-norm transformer block: x + attention(LN(x)), then + MLP(LN(·)).
    b, s, d = x.shape
    h = w["heads"]
    qkv = _layer_norm(xp, x) @ w["qkv_w"].T + w["qkv_b"]
    qkv = qkv.reshape(b, s, 3, h, d // h).transpose(2, 0, 3, 1, 4)
    a = attention(xp, qkv[0], qkv[1], qkv[2], causal=False)
    x = x + a.transpose(0, 2, 1, 3).reshape(b, s, d) @ w["proj_w"].T + w["proj_b"]
    return x + mlp_forward(xp, w, _layer_norm(xp, x))


def infer_torch(torch: Any, model: Any, x: Any, mode: str) -> Any:
    if mode == "inference":
        with torch.inference_mode():  # no autograd bookkeeping, no version counters
            return model(x)
    if mode == "no_grad":
        with torch.no_grad():
            return model(x)
    return model(x)  # grad enabled: autograd records the graph for a backward that never comes


def build_torch_model(torch: Any, kind: str, w: Mapping[str, Any]) -> Any:
    nn, F = torch.nn, torch.nn.functional

    def linear(name: str) -> Any:
        weight = w[f"{name}_w"]
        layer = nn.Linear(weight.shape[1], weight.shape[0], dtype=torch.float64)  # cast later, once
        layer.weight.data.copy_(torch.from_numpy(weight))
        layer.bias.data.copy_(torch.from_numpy(w[f"{name}_b"]))
        return layer

    mlp = nn.Sequential(linear("fc1"), nn.GELU(approximate="tanh"), linear("fc2"))
    if kind == "mlp":
        return mlp

    module: Any = nn.Module  # torch is imported lazily: the class is built here, not at import

    class Block(module):
        def __init__(self) -> None:
            super().__init__()
            self.heads = w["heads"]
            self.ln1 = nn.LayerNorm(w["width"], elementwise_affine=False)
            self.ln2 = nn.LayerNorm(w["width"], elementwise_affine=False)
            self.qkv, self.proj, self.mlp = linear("qkv"), linear("proj"), mlp

        def forward(self, x: Any) -> Any:
            b, s, d = x.shape
            qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
            x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
            return x + self.mlp(self.ln2(x))

    return Block()


class RuntimeModel:
    """A runtime's forward pass (gpuplay.core.runtimes) where the step calls `model(x)`."""

    def __init__(self, built: runtimes.Built) -> None:
        self.built, self.run = built, built.run

    def __call__(self, x: Any) -> Any:
        return self.run(x)


def build_runtime(torch: Any, runtime: str, p: Mapping[str, Any], x: Any) -> RuntimeModel:
    """The model handed to `runtime` (cached per model, shapes, dtype, device in this engine)."""
    dtype = str(x.dtype).removeprefix("torch.")
    device = str(x.device) if x.device.type != "cuda" else f"cuda:{x.device.index or 0}"
    w = model_weights(p["model"], p["width"], p["heads"])

    def make() -> Any:
        return build_torch_model(torch, p["model"], w).to(device=x.device, dtype=x.dtype).eval()

    return RuntimeModel(runtimes.build(runtime, (p["model"], p["width"], p["heads"]), make, x, dtype, device))


@functools.lru_cache(maxsize=4)
def model_weights(kind: str, width: int, heads: int) -> dict[str, Any]:
    """The model's weights, float64, the same for every backend (seeded: results are comparable)."""
    rng = np.random.default_rng(20_250_101 + width)
    shapes = {"fc1": (4 * width, width), "fc2": (width, 4 * width)}
    if kind == "block":
        shapes |= {"qkv": (3 * width, width), "proj": (width, width)}
    w: dict[str, Any] = {"heads": heads, "width": width}
    for name, (out_f, in_f) in shapes.items():
        w[f"{name}_w"] = rng.standard_normal((out_f, in_f)) / math.sqrt(in_f)
        w[f"{name}_b"] = 0.1 * rng.standard_normal(out_f)
    return w


def _import_torchao() -> Any:
    # torchao logs a warning per optional CUDA extension it cannot load; not the user's concern.
    # Importing it also makes torch log a deprecation from its pytree registry.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torchao
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    return torchao, quantize_, Int8DynamicActivationInt8WeightConfig


def quantize_int8(model: Any) -> Any:
    _, quantize_, config = _import_torchao()
    quantize_(model, config())
    return model


@functools.lru_cache(maxsize=8)
def int8_refusal(device: str, dtype: str) -> str | None:
    """Why torchao's dynamic INT8 cannot run here, from a tiny real model; None if it can."""
    if dtype != "float32":
        return f"INT8 dynamic quantization converts float32 Linear layers; dtype is {dtype}: use float32"
    try:
        torchao = _import_torchao()[0]
    except ImportError as exc:
        return (
            f"torchao is not installed ({exc}): pip install torchao for INT8 dynamic quantization "
            "(from a checkout: pip install -e '.[int8]')"
        )
    import torch

    try:
        layer = quantize_int8(torch.nn.Sequential(torch.nn.Linear(32, 32)).to(device))
        with torch.inference_mode():
            layer(torch.ones((4, 32), device=device))
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return f"torchao {torchao.__version__} INT8 dynamic quantization fails on {device}: {type(exc).__name__}: {first}"
    return None


class Inference(Workload):
    name = "inference"
    reference_name = "the float32 forward pass"  # see reference(): float32 weights and maths
    title = "Model inference: MLP / transformer block"
    category = "models"
    params = (
        Param(
            "model",
            str,
            "block",
            "mlp: Linear-GELU-Linear; block: pre-norm transformer block",
            choices=("mlp", "block"),
        ),
        Param("mode", str, "inference", "torch autograd mode", choices=("grad", "no_grad", "inference")),
        Param(
            "quant", str, "none", "int8: torchao dynamic INT8 of the Linear layers", choices=("none", "int8")
        ),
        Param("batch", int, 8, "batch size", minimum=1, maximum=1 << 16, size=True),
        Param("seq", int, 128, "tokens per sequence (block)", minimum=1, maximum=1 << 15),
        Param("width", int, 256, "model width (d_model)", minimum=8, maximum=16384),
        Param("heads", int, 8, "attention heads (block)", minimum=1, maximum=256),
        Param(
            "runtime",
            str,
            "eager",
            "who runs the torch model: eager, torchscript, onnxruntime, tensorrt (export/build time apart)",
            choices=runtimes.RUNTIMES,
        ),
    )
    amp_eligible = True
    tol_scale = 10.0

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        p = super().resolve(given)
        if p["model"] == "block" and p["width"] % p["heads"]:
            raise ValueError(f"width must be a multiple of heads; got width={p['width']}, heads={p['heads']}")
        return p

    def scaled(self, p: Mapping[str, Any], factor: float) -> dict[str, Any]:
        # The step-cost probes run the eager model as the runtime's stand-in: a probe of its own
        # would export and build the model again at each probe size (seconds each, thrown away).
        return {**super().scaled(p, factor), "runtime": "eager"}

    def size_label(self, p: Mapping[str, Any]) -> str:
        if p["model"] == "mlp":
            return f"MLP {p['batch']}×{p['width']}"
        return f"block {p['batch']}×{p['seq']}×{p['width']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        shape = (p["batch"], p["width"]) if p["model"] == "mlp" else (p["batch"], p["seq"], p["width"])
        return (rng.standard_normal(shape),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        if backend == "torch":
            return infer_torch
        return mlp_forward if p["model"] == "mlp" else block_forward

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        if backend == "torch" and p["runtime"] != "eager":
            return [build_torch_model, build_runtime, runtimes.module(p["runtime"]).build]
        if backend == "torch":
            return [build_torch_model]
        helpers: list[Callable[..., Any]] = [gelu_ops]
        if p["model"] == "block":
            helpers = [mlp_forward, _layer_norm, attention, *helpers]
        return helpers

    def kernel(self, backend: str, xp: Any, p: Mapping[str, Any]) -> Callable[..., Any]:
        if backend == "torch":
            return functools.partial(infer_torch, xp, mode=p["mode"])
        return functools.partial(self.kernel_function(backend, p), xp)

    def prepare(
        self, backend: str, device: str, args: tuple[Any, ...], p: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        (x,) = args
        w = model_weights(p["model"], p["width"], p["heads"])
        if backend == "torch":
            import torch

            if p["runtime"] != "eager":
                return build_runtime(torch, p["runtime"], p, x), x
            model = build_torch_model(torch, p["model"], w).to(device=x.device, dtype=x.dtype).eval()
            if p["quant"] == "int8":
                model = quantize_int8(model)
            return model, x
        if backend == "cupy":
            import cupy as xp
        else:
            xp = np
        return {k: xp.asarray(v, dtype=x.dtype) if isinstance(v, np.ndarray) else v for k, v in w.items()}, x

    def setup_report(self, args: tuple[Any, ...]) -> SetupReport | None:
        model = args[0] if args else None
        if not isinstance(model, RuntimeModel):
            return None
        b = model.built
        reused = ("runtime: reused the build of an earlier run in this engine process",) if b.cached else ()
        return SetupReport(b.build_s, not b.cached, b.conditions, (*b.notes, *reused))

    def needs_backend(self, p: Mapping[str, Any]) -> str | None:
        return "torch" if p.get("runtime", "eager") != "eager" else None

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        w = model_weights(p["model"], p["width"], p["heads"])
        w32 = {k: v.astype(np.float32) if isinstance(v, np.ndarray) else v for k, v in w.items()}
        fwd = mlp_forward if p["model"] == "mlp" else block_forward
        return np.asarray(fwd(np, w32, inputs[0].astype(np.float32)), dtype=np.float64)

    def flops(self, p: Mapping[str, Any]) -> float:
        w = p["width"]
        if p["model"] == "mlp":
            return 16.0 * p["batch"] * w * w
        tokens = p["batch"] * p["seq"]
        return 24.0 * tokens * w * w + 4.0 * p["batch"] * p["seq"] ** 2 * w

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        w = p["width"]
        if p["model"] == "mlp":
            return (8.0 * w * w + 2.0 * p["batch"] * w) * itemsize
        return (12.0 * w * w + 2.0 * p["batch"] * p["seq"] * w) * itemsize

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        tokens = p["batch"] * (1 if p["model"] == "mlp" else p["seq"])
        extra = 0 if p["model"] == "mlp" else p["batch"] * p["heads"] * p["seq"] ** 2
        return 12.0 * p["width"] ** 2 + 8.0 * tokens * p["width"] + extra

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        if p["quant"] == "int8":
            return INT8_TOLERANCE
        # The reference is float32: a float64 run differs from it by float32's rounding.
        eps = max(EPS[compute_dtype], EPS["float32"])
        return self.tol_scale * eps * math.log2(max(2, p["width"]))

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        # Decided where torch is already loaded (the planner probes it first); never imported here.
        if p["runtime"] != "eager":
            return self.runtime_refusal(backend, device, dtype, p)
        if backend == "torch" and p["quant"] == "int8" and "torch" in sys.modules:
            return int8_refusal(device, dtype)
        return None

    def graph_refusal(self, p: Mapping[str, Any]) -> tuple[str, str] | None:
        why = runtimes.capture_refusal(p["runtime"]) if p["runtime"] != "eager" else None
        if why is None:
            return None
        return (
            f"runtime={p['runtime']} cannot be captured in a CUDA graph: {why}",
            "turn --graphs off, or use a runtime torch captures (eager, torchscript)",
        )

    def runtime_refusal(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        rt = p["runtime"]
        if backend != "torch":
            return f"runtime={rt} runs the torch.nn model (exported or traced from it): use backend torch"
        if p["quant"] != "none":
            return f"quant={p['quant']} is torchao on the eager model; runtime={rt} builds its own: use one"
        return runtimes.refusal(rt, device, dtype)

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        notes = ["accuracy: checked against the float32 forward pass (NumPy), not float64"]
        if backend != "torch":
            ignored = [f"{k}={p[k]}" for k, d in (("mode", "inference"), ("quant", "none")) if p[k] != d]
            notes.append(
                f"{backend} runs the forward pass by hand with the same weights; no autograd, no INT8"
                + (f" ({', '.join(ignored)} applies to torch only)" if ignored else "")
            )
        elif p["runtime"] in ("onnxruntime", "tensorrt"):
            wraps = (
                "AMP and compile wrap"
                if p["runtime"] == "onnxruntime"
                else "AMP, compile and CUDA graphs wrap"
            )
            notes.append(
                f"runtime: {p['runtime']} runs its own kernels: {wraps} only the call into it, and mode does nothing there"
            )
        elif p["quant"] == "int8":
            notes.append("INT8: torchao dynamic quantization (int8 weights, activations quantized per step)")
        return notes


WORKLOADS: list[Callable[[], Workload]] = [Inference]
