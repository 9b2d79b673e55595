"""Which combinations make sense, and why the others are refused.

Every refusal says what is wrong and what to do instead; the app shows the same
words beside a disabled control that the CLI prints.
"""

from __future__ import annotations

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
    wanted = "cuda:0" if device == "cuda" else device
    if wanted not in ids:
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
    b, dev, dt = spec.backend, spec.device, spec.dtype
    cdtype = compute_dtype(spec, workload)
    notes: list[str] = []

    if dt == "bfloat16" and b in ("numpy", "cupy"):
        return Refusal(f"{get_backend(b).title} has no bfloat16 dtype", "use torch, or float16/float32")
    reason = workload.unsupported(b, dev, dt, params)
    if reason:
        return Refusal(reason)

    if spec.amp != "off":
        if b != "torch":
            return Refusal("AMP is torch.autocast: it exists on PyTorch only", "set amp off or backend torch")
        if dt != "float32":
            return Refusal(f"AMP autocasts float32 code; dtype is {dt}", "set dtype float32 with AMP")
        if not workload.amp_eligible:
            notes.append(
                f"AMP: {workload.title} has no autocast-eligible op (autocast lowers matmul-like ops), "
                "so it still computes in float32"
            )
    reason = workload.unsupported_in(b, dev, cdtype, params)
    if reason:
        return Refusal(reason)
    if spec.compile != "off":
        if b != "torch":
            return Refusal("torch.compile exists on PyTorch only", "set compile off or backend torch")
        if not workload.compile_safe:
            return Refusal(
                f"{workload.title} is not safe to compile: its step drives streams, host buffers or "
                "formats torch.compile does not trace faithfully",
                "set compile off",
            )
        if params.get("method") == "fd":
            return Refusal(
                "finite differences are a Python loop of 2·n² calls; torch.compile would unroll all of them",
                "compile autograd (method=autograd) instead",
            )
        if dev == "cpu" and spec.compile in ("reduce-overhead",):
            notes.append("compile reduce-overhead: CUDA graphs do not exist on the CPU; behaves as default")
    if spec.tf32:
        if not (b == "torch" and dev.startswith("cuda")):
            return Refusal(
                "TF32 is an NVIDIA tensor-core format (Ampere and newer)", "needs torch on a cuda device"
            )
        if cdtype != "float32":
            notes.append("TF32 changes float32 matmuls only; this run computes in " + cdtype)
    if spec.cuda_graphs:
        if not (b == "torch" and dev.startswith("cuda")):
            return Refusal("CUDA graphs need torch on a cuda device")
        if not workload.graph_safe:
            return Refusal(
                f"{workload.title} synchronises with the host inside each step, which CUDA graph capture forbids"
            )
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
    if spec.linalg_library != "default" and not (b == "torch" and dev.startswith("cuda")):
        return Refusal("the preferred linalg library (cuSOLVER/MAGMA) is a torch CUDA setting")
    if spec.transfers and dev != "cpu" and type(workload).prepare is not Workload.prepare:
        return Refusal(
            f"{workload.title} builds its step's inputs once outside the timing (a CSR matrix, a model, "
            "host buffers); timing transfers would upload raw arrays instead",
            "turn --transfers off; the transfers scenario measures copies",
        )
    if spec.transfers and dev == "cpu":
        notes.append("transfers: none, the data already lives in host memory")
    notes.extend(workload.notes(b, dev, dt, params))
    if dt in ("float16", "bfloat16") and dev == "cpu":
        from gpuplay.core.halfprec import half_precision_note

        notes.append(half_precision_note(dt))  # from this CPU's calibrated rates, not its brand
    return Assessment(workload, params, cdtype, notes)
