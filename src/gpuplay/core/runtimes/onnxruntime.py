"""ONNX Runtime: the model exported with torch.onnx.export, run by an InferenceSession.

On the CPU the CPUExecutionProvider runs it on NumPy views of the tensors (no copy). On cuda:N
the CUDAExecutionProvider (the TensorRT provider first, when the package has it, except for an
IEEE float32 run) runs it with I/O binding, so the input and output stay on the device, on a CUDA stream
of its own that torch made and handed to it (user_compute_stream). Not torch's current stream:
that is the legacy default stream, whose handle is 0, and ORT reads a user_compute_stream of 0
as none given and runs on a stream of its own making, which the step's events would not see.
Each call joins the two streams both ways (ORT's stream waits for the input, torch's waits for
ORT's kernels), so the step's CUDA events bracket ORT's kernels.

Its CUDA provider computes float32 in TF32 unless told (use_tf32 defaults to 1): the run's tf32
lever is passed as use_tf32, and the TensorRT provider, which has no such switch, is not asked
for float32 with TF32 off. ORT's kernels are launched by ORT, not by torch: torch's CUDA graph capture
cannot record them (CAPTURABLE; the planner refuses graphs with this runtime). What the session
really used is read back from it: a session asked for CUDA that runs on the CPU is said in the
conditions and notes, not hidden.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
import warnings
from importlib import metadata
from typing import Any

from gpuplay.core.runtimes import installed

# The packages themselves (gpuplay is not on the package index; the extras need a checkout).
EXTRA_CPU = "pip install onnxruntime onnx onnxscript (from a checkout: pip install -e '.[onnx]')"
EXTRA_GPU = (
    "pip install onnxruntime-gpu onnx onnxscript, in place of onnxruntime: both provide the onnxruntime "
    "module (from a checkout: pip install -e '.[onnx-gpu]')"
)
NUMPY_TYPES = {"float32": "float32", "float16": "float16", "float64": "float64"}
CAPTURABLE = False
NOT_CAPTURABLE = (
    "ONNX Runtime launches its own kernels on its own stream: torch's CUDA graph capture cannot "
    "record them (ORT has its own CUDA graphs, enable_cuda_graph, which gpuplay does not drive)"
)


def _gpu_package() -> bool:
    """Whether the installed onnxruntime is a GPU build, read from its distribution's name."""
    for dist in ("onnxruntime-gpu", "onnxruntime_gpu"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            metadata.version(dist)
            return True
    return False


def available(device: str) -> str | None:
    missing = [p for p in ("onnxruntime", "onnx", "onnxscript") if not installed(p)]
    if missing:
        extra = EXTRA_GPU if device.startswith("cuda") else EXTRA_CPU
        return f"ONNX Runtime needs {', '.join(missing)}, not installed here: {extra}"
    if device == "mps":
        return "ONNX Runtime has no execution provider for Apple's MPS device in gpuplay: use cpu"
    if device.startswith("cuda") and not _gpu_package():
        return (
            f"the onnxruntime installed here is the CPU package: it has no CUDAExecutionProvider for {device}; "
            + EXTRA_GPU
        )
    return None


def dtype_refusal(dtype: str) -> str | None:
    if dtype not in NUMPY_TYPES:
        return f"ONNX Runtime has too few {dtype} kernels for this model; use float32 or float16"
    return None


# onnxruntime_session_options_config_keys.h: "1" (the default) lets idle pool threads spin
SPIN_KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")


def _spinning(session: Any) -> str:
    """'off' when the session's own options say its threads sleep between runs, as asked."""
    try:
        got = session.get_session_options()
    except AttributeError:  # an ORT without the getter: say what was asked
        return "off (asked)"
    values = set()
    for key in SPIN_KEYS:
        try:
            values.add(str(got.get_session_config_entry(key)))
        except (RuntimeError, AttributeError):  # unset: ORT's default, spinning
            values.add("1 (default)")
    return "off" if values == {"0"} else f"on ({', '.join(sorted(values))})"


def notes(device: str, conditions: dict[str, Any]) -> list[str]:
    fell = (
        [f"runtime: ONNX Runtime fell back: {conditions['ort_fallback']}"]
        if "ort_fallback" in conditions
        else []
    )
    return fell + [
        "runtime: ONNX Runtime, the model exported with torch.onnx.export, run by onnxruntime.InferenceSession"
    ]


def build_settings() -> Any:
    """What a session fixes at build time from the run's settings: its intra-op threads are
    torch's then, so a run at another `threads` builds its own session (like for like)."""
    import torch

    return torch.get_num_threads()


def export(model: Any, example: Any) -> bytes:
    """The model as ONNX bytes (torch's dynamo exporter, which needs onnxscript)."""
    import torch

    quiet = [logging.getLogger(n) for n in ("torch.onnx", "torch.onnx._internal.exporter._registration")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.ERROR)  # "torchvision is not installed. Skipping …" is not the user's concern
    try:
        with contextlib.redirect_stdout(io.StringIO()), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's progress lines and its own deprecations
            program = torch.onnx.export(model.eval(), (example,), dynamo=True, verbose=False)
        if program is None:  # only with an f= path given, which is not
            raise RuntimeError("torch.onnx.export returned no program")
        proto: bytes = program.model_proto.SerializeToString()
        return proto
    finally:
        for lg, level in zip(quiet, levels, strict=True):
            lg.setLevel(level)


def providers_for(
    ort: Any, device: str, stream: int | None, tf32: bool = False, dtype: str = "float32"
) -> list[Any]:
    """The providers to ask for, best first; the CPU's always last (ORT's own fallback).
    `stream`: the handle of the CUDA stream ORT's kernels are to run on (never 0: ORT reads 0 as
    none given). The TensorRT provider builds float32 layers in TF32 and ORT gives it no switch:
    it is not asked for an IEEE float32 run."""
    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    index = int(device.partition(":")[2] or 0)
    have = set(ort.get_available_providers())
    cuda: dict[str, Any] = {"device_id": index, "use_tf32": "1" if tf32 else "0"}
    own: dict[str, Any] = {}
    if stream:
        own = {"has_user_compute_stream": "1", "user_compute_stream": str(stream)}
    asked: list[Any] = []
    if "TensorrtExecutionProvider" in have and (tf32 or dtype != "float32"):
        asked.append(("TensorrtExecutionProvider", {"device_id": index, **own}))
    asked.append(("CUDAExecutionProvider", {**cuda, **own}))
    return [*asked, "CPUExecutionProvider"]


def build(
    model: Any, example: Any, dtype: str, device: str, tf32: bool = False
) -> tuple[Any, float, dict[str, Any]]:
    import onnxruntime as ort
    import torch

    t0 = time.perf_counter()
    proto = export(model, example)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = torch.get_num_threads()  # as many as torch's: like for like on the CPU
    # ORT's thread pools spin after each run by default: the step timed next (a paired partner's)
    # ran 4x slower on the 2-core machine (1.09 ms alone, 4.18 ms right after an ORT run; 1.09 ms
    # with spinning off, ORT's own step unchanged), and the ladder kept ORT over faster rungs.
    for key in SPIN_KEYS:
        opts.add_session_config_entry(key, "0")
    stream = torch.cuda.Stream(device) if device.startswith("cuda") else None
    asked = providers_for(ort, device, stream.cuda_stream if stream is not None else None, tf32, dtype)
    session = ort.InferenceSession(proto, opts, providers=asked)
    used = list(session.get_providers())
    conditions: dict[str, Any] = {
        "runtime": "onnxruntime",
        "onnxruntime": getattr(ort, "__version__", "?"),
        "ort_providers": ", ".join(used),
        "ort_graph_optimization": "ORT_ENABLE_ALL",
        "ort_intra_op_threads": opts.intra_op_num_threads,
        "ort_thread_spinning": _spinning(session),
    }
    wanted = asked[0][0] if isinstance(asked[0], tuple) else asked[0]
    if wanted not in used:
        conditions["ort_fallback"] = f"{wanted} asked, the session runs on {used[0] if used else 'nothing'}"
    if device.startswith("cuda") and (used[0] if used else "") == "CPUExecutionProvider":
        run = _cpu_run(session)  # it fell back: time what it does, copies and all
    elif device.startswith("cuda") and stream is not None:
        conditions["ort_tf32"] = (
            "on (use_tf32=1)"
            if tf32
            else "off (use_tf32=0; the TensorRT provider, which has no switch, not asked for float32)"
        )
        conditions["ort_stream"] = "its own CUDA stream, joined to torch's both ways each step"
        run = _bound_run(session, example, dtype, device, stream)
    else:
        run = _cpu_run(session)
    return run, time.perf_counter() - t0, conditions


def _cpu_run(session: Any) -> Any:
    import torch

    name = session.get_inputs()[0].name

    def run(x: Any) -> Any:
        # x.cpu() is x itself on the CPU; on a GPU (a session that fell back) it is the copy ORT needs
        return torch.from_numpy(session.run(None, {name: x.detach().cpu().numpy()})[0]).to(x.device)

    return run


def _bound_run(session: Any, example: Any, dtype: str, device: str, stream: Any) -> Any:
    """I/O binding: ORT reads the input and writes the output in place on the device, on `stream`."""
    import numpy as np
    import torch

    index = int(device.partition(":")[2] or 0)
    element = np.dtype(NUMPY_TYPES[dtype])
    inp, outp = session.get_inputs()[0], session.get_outputs()[0]
    out = torch.empty(
        tuple(example.shape[:-1]) + (int(outp.shape[-1]),), dtype=example.dtype, device=example.device
    )
    binding = session.io_binding()
    binding.bind_output(outp.name, "cuda", index, element, tuple(out.shape), out.data_ptr())
    bound = [0]

    def run(x: Any) -> Any:
        if x.data_ptr() != bound[0]:  # the same input tensor every step: bound once
            binding.bind_input(inp.name, "cuda", index, element, tuple(x.shape), x.data_ptr())
            bound[0] = x.data_ptr()
        current = torch.cuda.current_stream(device)
        stream.wait_stream(current)  # the input is written before ORT reads it
        session.run_with_iobinding(binding)
        current.wait_stream(stream)  # the step's end event comes after ORT's last kernel
        return out

    return run
