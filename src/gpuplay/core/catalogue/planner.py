"""Which combinations make sense, and why the others are refused.

Every refusal says what is wrong and what to do instead; the app shows the same
words beside a disabled control that the CLI prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplay.core.backends import get_backend
from gpuplay.core.spec import Plan, Refusal, RunSpec
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.base import Workload

AMP_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def compute_dtype(spec: RunSpec, workload: Workload | None = None) -> str:
    """The precision the arithmetic actually runs in (AMP lowers it for eligible ops)."""
    if spec.amp == "off":
        return spec.dtype
    if (workload or get_workload(spec.workload)).amp_eligible:
        return AMP_DTYPES[spec.amp]
    return spec.dtype


@dataclass(frozen=True)
class Assessment:
    """What checking a spec worked out on the way, so nobody works it out again."""

    workload: Workload
    params: dict[str, Any]  # resolved: defaults filled in, each value checked
    compute_dtype: str
    notes: list[str]


def device_refusal(backend_name: str, device: str, probe_timeout: float | None = None) -> Refusal | None:
    backend = get_backend(backend_name)
    avail, devices = backend.probe(probe_timeout)
    if not avail.ok:
        return Refusal(avail.reason, pending=avail.pending)
    if backend_name == "numpy" and device != "cpu":
        return Refusal("NumPy runs on the host CPU only", "use torch or cupy for a GPU")
    if backend_name == "cupy" and device == "cpu":
        return Refusal("CuPy runs on CUDA devices only", "use numpy for the CPU")
    ids = [d.id for d in devices]
    wanted = "cuda:0" if device == "cuda" else "xpu:0" if device == "xpu" else device
    if wanted not in ids:
        if backend_name == "torch" and wanted.startswith("xpu"):
            return Refusal(
                f"PyTorch sees no Intel GPU {wanted} (torch.xpu)", f"devices here: {', '.join(ids)}"
            )
        if backend_name == "torch" and wanted.startswith("cuda"):
            reason = backend.cuda_reason() or f"PyTorch sees no device {wanted} (devices: {', '.join(ids)})"  # type: ignore[attr-defined]
            return Refusal(reason)
        return Refusal(f"{backend.title} has no device {wanted}", f"devices here: {', '.join(ids) or 'none'}")
    return None


def check(spec: RunSpec, probe_timeout: float | None = None) -> Plan | Refusal:
    """A Plan with notes for a spec that can run here, else the Refusal explaining why not."""
    found = assess(spec, probe_timeout)
    return found if isinstance(found, Refusal) else Plan(spec, found.notes)


def assess(spec: RunSpec, probe_timeout: float | None = None) -> Assessment | Refusal:
    """`check`, keeping the workload, parameters and compute dtype it resolved."""
    try:
        workload = get_workload(spec.workload)
        params = workload.resolve(spec.params)
    except (KeyError, ValueError) as exc:
        return Refusal(str(exc).strip("'\""))
    refusal = device_refusal(spec.backend, spec.device, probe_timeout)
    if refusal:
        return refusal
    found = Assessment(workload, params, compute_dtype(spec, workload), [])
    for rule in RULES:  # in order: the first refusal is the one shown
        refusal = rule(spec, found)
        if refusal:
            return refusal
    found.notes.extend(workload.notes(spec.backend, spec.device, spec.dtype, params))
    if spec.dtype in ("float16", "bfloat16") and spec.device == "cpu":
        from gpuplay.core.catalogue.halfprec import half_precision_note

        found.notes.append(half_precision_note(spec.dtype))  # from this CPU's calibrated rates, not its brand
    return found


# -- the rules: each refuses a spec with why and what to do instead, or adds notes and passes --
Rule = Callable[[RunSpec, Assessment], Refusal | None]


def _on_torch_cuda(spec: RunSpec) -> bool:
    """torch on a cuda device: NVIDIA's, or AMD's under ROCm (HIP graphs, TF32 on MI300)."""
    return spec.backend == "torch" and spec.device.startswith("cuda")


def _dtype_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    """The storage dtype exists in the backend, and the workload runs in it there."""
    b = spec.backend
    if spec.dtype == "bfloat16" and b in ("numpy", "cupy"):
        return Refusal(f"{get_backend(b).title} has no bfloat16 dtype", "use torch, or float16/float32")
    reason = a.workload.unsupported(b, spec.device, spec.dtype, a.params)
    return Refusal(reason) if reason else None


def _device_extra(spec: RunSpec) -> dict[str, Any]:
    """What the backend's probe said about the run's device (vendor, arch, fp64), {} if nothing."""
    wanted = "cuda:0" if spec.device == "cuda" else "xpu:0" if spec.device == "xpu" else spec.device
    for d in get_backend(spec.backend).devices(0):
        if d.id == wanted:
            return {**d.extra, "name": d.name}
    return {}


def _accelerator_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    """What AMD, Intel and Apple devices lack, said as theirs (core/hw), before the CUDA rules."""
    if spec.backend != "torch" or spec.device == "cpu":
        return None
    # Imported past the return: a NumPy or CPU run's planning (in the front end and again in the
    # engine) never needs them (~5 ms of each on the 2-core machine).
    from gpuplay.core.hw import amd, apple

    info = _device_extra(spec)
    if spec.device == "mps":
        if "float64" in (spec.dtype, a.compute_dtype):
            return Refusal(apple.NO_FLOAT64, "use float32")
        if spec.cuda_graphs:
            return Refusal(apple.NO_GRAPHS, "turn graphs off")
    if spec.device.startswith("xpu") and info.get("fp64") is False and spec.dtype == "float64":
        return Refusal(
            f"{info.get('name', spec.device)} has no float64 (torch.xpu: has_fp64 is False)", "use float32"
        )
    if info.get("vendor") == "AMD" and spec.tf32:
        reason = amd.tf32_refusal(str(info.get("arch", "")), str(info.get("name", spec.device)))
        if reason:
            return Refusal(reason, "turn TF32 off")
        reason = amd.hipblaslt_tf32_refusal(os.environ)
        if reason:
            return Refusal(
                reason,
                f"unset {amd.HIPBLASLT_TF32} (the engine sets it to 1) or set it to 1, or turn TF32 off",
            )
    return None


def _cupy_rocm_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    """What CuPy's ROCm build lacks (core/hw/amd.py), said before the run rather than as a HIP error."""
    if spec.backend != "cupy" or a.workload.name != "sparse" or a.params.get("format") != "csr":
        return None
    if _device_extra(spec).get("vendor") != "AMD":
        return None
    from gpuplay.core.hw import amd

    return Refusal(amd.CUPY_ROCM_SPARSE, "use torch, or format=dense")


def _amp_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if spec.amp == "off":
        return None
    if spec.backend != "torch":
        return Refusal("AMP is torch.autocast: it exists on PyTorch only", "set amp off or backend torch")
    if spec.dtype != "float32":
        return Refusal(f"AMP autocasts float32 code; dtype is {spec.dtype}", "set dtype float32 with AMP")
    runtime = a.params.get("runtime")
    if runtime in ("onnxruntime", "tensorrt"):
        return Refusal(
            f"AMP is torch.autocast, which the model exported to {runtime} does not see: it would run "
            "in float32 under an AMP label",
            "set amp off (the runtime's precision is its dtype, e.g. --dtype float16)",
        )
    if not a.workload.amp_eligible:
        a.notes.append(
            f"AMP: {a.workload.title} has no autocast-eligible op (autocast lowers matmul-like ops), "
            "so it still computes in float32"
        )
    return None


def _compute_dtype_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    """The workload runs in the precision the arithmetic actually uses (after AMP)."""
    reason = a.workload.unsupported_in(spec.backend, spec.device, a.compute_dtype, a.params)
    return Refusal(reason) if reason else None


def _compile_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if spec.compile == "off":
        return None
    if spec.backend != "torch":
        return Refusal("torch.compile exists on PyTorch only", "set compile off or backend torch")
    if not a.workload.compile_safe:
        return Refusal(
            f"{a.workload.title} is not safe to compile: its step drives streams, host buffers or "
            "formats torch.compile does not trace faithfully",
            "set compile off",
        )
    if a.params.get("method") == "fd":
        return Refusal(
            "finite differences are a Python loop of 2·n² calls; torch.compile would unroll all of them",
            "compile autograd (method=autograd) instead",
        )
    if spec.device == "cpu" and spec.compile in ("reduce-overhead",):
        a.notes.append("compile reduce-overhead: CUDA graphs do not exist on the CPU; behaves as default")
    return None


def _tf32_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if not spec.tf32:
        return None
    if not _on_torch_cuda(spec):
        return Refusal(
            "TF32 is an NVIDIA tensor-core format (Ampere and newer)", "needs torch on a cuda device"
        )
    if a.compute_dtype != "float32":
        a.notes.append("TF32 changes float32 matmuls only; this run computes in " + a.compute_dtype)
    return None


def _graphs_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if not spec.cuda_graphs:
        return None
    if not _on_torch_cuda(spec):
        return Refusal("CUDA graphs need torch on a cuda device")
    if not a.workload.graph_safe:
        return Refusal(
            f"{a.workload.title} synchronises with the host inside each step, which CUDA graph capture forbids"
        )
    uncapturable = a.workload.graph_refusal(a.params)
    if uncapturable:
        return Refusal(*uncapturable)
    if spec.compile in ("reduce-overhead", "max-autotune"):
        return Refusal(
            f"compile mode {spec.compile} already captures CUDA graphs of its own", "turn one of them off"
        )
    if spec.transfers:
        return Refusal(
            "timed transfers copy from and to host memory inside each step, which a CUDA graph "
            "cannot capture (a pageable copy synchronises with the host)",
            "turn --transfers or --graphs off",
        )
    return None


def _linalg_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if spec.linalg_library != "default" and not _on_torch_cuda(spec):
        return Refusal("the preferred linalg library (cuSOLVER/MAGMA) is a torch CUDA setting")
    return None


def _transfers_rule(spec: RunSpec, a: Assessment) -> Refusal | None:
    if not spec.transfers:
        return None
    if spec.device == "cpu":
        a.notes.append("transfers: none, the data already lives in host memory")
    elif type(a.workload).prepare is not Workload.prepare:
        return Refusal(
            f"{a.workload.title} builds its step's inputs once outside the timing (a CSR matrix, a model, "
            "host buffers); timing transfers would upload raw arrays instead",
            "turn --transfers off; the transfers scenario measures copies",
        )
    return None


RULES: tuple[Rule, ...] = (
    _dtype_rule,
    _accelerator_rule,
    _cupy_rocm_rule,
    _amp_rule,
    _compute_dtype_rule,
    _compile_rule,
    _tf32_rule,
    _graphs_rule,
    _linalg_rule,
    _transfers_rule,
)
