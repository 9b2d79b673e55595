"""The levers: attention backends, inference modes and INT8, transfers, fusion,
sparse formats, and the profile, on real NumPy/SciPy and PyTorch (CPU)."""

from __future__ import annotations

import json
import sys

import pytest

from gpuplay.core.runner import run
from gpuplay.core.runner.profile import profile_spec
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload

ATT = {"batch": 1, "heads": 2, "seq": 48, "dim": 16}
MLP = {"model": "mlp", "batch": 4, "width": 32}
BLOCK = {"model": "block", "batch": 2, "seq": 8, "width": 32, "heads": 4}


def quick(workload, params, **kw):
    kw.setdefault("warmup", 1)
    kw.setdefault("repeat", 2)
    return run(RunSpec.make(workload, params, **kw))


# -- attention -------------------------------------------------------------------
@pytest.mark.parametrize("sdpa", ["math", "flash", "auto"])
@pytest.mark.parametrize("causal", ["off", "on"])
def test_attention_backends_that_run_here_match_float64(sdpa, causal):
    r = quick("attention", {**ATT, "sdpa": sdpa, "causal": causal}, backend="torch", dtype="float64")
    assert r.status == "ok", r.message
    assert r.check_ok and r.error < 1e-12, r.error


def test_attention_causal_mask_changes_the_reference():
    w = get_workload("attention")
    import numpy as np

    inputs = w.inputs(w.resolve(ATT), np.random.default_rng(0))
    off = w.reference(w.resolve({**ATT, "causal": "off"}), inputs)
    on = w.reference(w.resolve({**ATT, "causal": "on"}), inputs)
    assert np.allclose(off[..., -1, :], on[..., -1, :])  # the last query sees every key either way
    assert not np.allclose(off[..., 0, :], on[..., 0, :])  # the first sees only itself when causal
    assert np.allclose(on[..., 0, :], inputs[2][..., 0, :])


@pytest.mark.parametrize("sdpa", ["efficient", "cudnn"])
def test_attention_backend_that_cannot_run_is_refused_with_torchs_reason(sdpa):
    r = quick("attention", {**ATT, "sdpa": sdpa}, backend="torch")
    assert r.status == "refused"
    assert "No viable backend" in r.message and f"the {sdpa} attention backend" in r.message
    assert "sdpa=math" in r.message  # what to do instead


def test_attention_numpy_is_naive_and_says_so():
    r = quick("attention", {**ATT, "sdpa": "flash"}, backend="numpy")
    assert r.status == "ok" and r.check_ok
    assert any("naive" in n and "torch only" in n for n in r.notes)


# -- inference -------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference"])
@pytest.mark.parametrize("params", [MLP, BLOCK], ids=["mlp", "block"])
def test_inference_modes_match_the_float32_forward(mode, params):
    r = quick("inference", {**params, "mode": mode}, backend="torch")
    assert r.status == "ok", r.message
    assert r.check_ok and r.error < 1e-5
    assert any("float32 forward" in n for n in r.notes)


def test_inference_mode_lever_reaches_autograd():
    import numpy as np
    import torch

    w = get_workload("inference")
    p = w.resolve(MLP)
    x = torch.from_numpy(w.inputs(p, np.random.default_rng(0))[0]).float()
    outs = {}
    for mode in ("grad", "no_grad", "inference"):
        pm = w.resolve({**MLP, "mode": mode})
        model, xx = w.prepare("torch", "cpu", (x,), pm)
        outs[mode] = w.kernel("torch", torch, pm)(model, xx)
    assert outs["grad"].requires_grad and outs["grad"].grad_fn is not None
    assert not outs["no_grad"].requires_grad and not outs["no_grad"].is_inference()
    assert outs["inference"].is_inference()


def test_numpy_and_torch_forward_agree_on_the_block():
    a = quick("inference", BLOCK, backend="numpy", dtype="float64")
    b = quick("inference", BLOCK, backend="torch", dtype="float64")
    assert a.check_ok and b.check_ok
    assert abs(a.error - b.error) < 1e-9  # both are float64 against the same float32 reference


def test_int8_costs_accuracy_against_float32():
    pytest.importorskip("torchao")
    fp32 = quick("inference", MLP, backend="torch")
    int8 = quick("inference", {**MLP, "quant": "int8"}, backend="torch")
    assert int8.status == "ok", int8.message
    assert int8.check_ok and int8.error > 100 * fp32.error  # INT8's cost is visible
    assert any("torchao" in n for n in int8.notes)


def test_int8_without_torchao_is_refused_with_how_to_install(monkeypatch):
    from gpuplay.core.workloads import inference

    def missing():
        raise ImportError("No module named 'torchao'")

    monkeypatch.setattr(inference, "_import_torchao", missing)
    inference.int8_refusal.cache_clear()
    try:
        r = quick("inference", {**MLP, "quant": "int8"}, backend="torch")
    finally:
        inference.int8_refusal.cache_clear()
    assert (
        r.status == "refused"
        and "torchao is not installed" in r.message
        and "pip install torchao " in r.message
    )


def test_int8_needs_float32():
    r = quick("inference", {**MLP, "quant": "int8"}, backend="torch", dtype="float64")
    assert r.status == "refused" and "float32" in r.message


# -- transfers ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["h2d", "d2h", "serial", "overlap"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_device_transfers_are_refused_on_the_cpu_with_the_reference_named(op, backend):
    r = quick("transfers", {"n": 4096, "op": op}, backend=backend)
    assert r.status == "refused"
    assert "CUDA device is needed" in r.message and "op=copy" in r.message


def test_transfers_on_cupy_say_why_not():
    r = quick("transfers", {"n": 4096, "op": "overlap"}, backend="cupy", device="cuda:0")
    assert r.status == "refused" and r.message


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_memory_copy_reference_runs_and_counts_read_and_write(backend):
    r = quick("transfers", {"n": 1 << 16, "op": "copy"}, backend=backend)
    assert r.status == "ok" and r.check_ok, r.message
    assert r.bytes == 2 * 4 * (1 << 16) and r.gbps and r.gbps > 0
    assert r.flops == 0 and any("host memory copy" in n for n in r.notes)


def test_pageable_memory_note_on_a_gpu_config():
    notes = get_workload("transfers").notes(
        "torch",
        "cuda:0",
        "float32",
        {"op": "overlap", "memory": "pageable", "non_blocking": "on", "chunks": 4},
    )
    assert any("cannot take effect" in n for n in notes)


# -- fused -------------------------------------------------------------------------
def test_fused_op_by_op_kernel_count_is_measured_on_torch():
    r = quick("fused", {"n": 10_000}, backend="torch")
    assert r.status == "ok" and r.check_ok
    counts = [n for n in r.notes if n.startswith("kernels per step")]
    assert counts and counts[0].startswith("kernels per step: 9 ") and "torch.profiler" in counts[0]


def test_fused_numpy_counts_by_construction_and_ignores_impl():
    r = quick("fused", {"n": 10_000, "impl": "raw"}, backend="numpy")
    assert r.status == "ok" and r.check_ok
    assert any("no kernel fusion" in n for n in r.notes)
    assert any(n.startswith("kernels per step: 9") and "construction" in n for n in r.notes)


@pytest.mark.parametrize("impl", ["elementwise", "raw"])
def test_cupy_kernels_on_torch_are_refused_with_compile_named(impl):
    r = quick("fused", {"n": 1000, "impl": impl}, backend="torch")
    assert r.status == "refused" and "--compile" in r.message


def test_cupy_kernel_source_is_in_the_code_view():
    w = get_workload("fused")
    assert "ElementwiseKernel" in w.source("cupy", w.resolve({"impl": "elementwise"}))
    assert "RawKernel" in w.source("cupy", w.resolve({"impl": "raw"}))
    assert "xp.tanh" in w.source("torch", w.resolve({}))


@pytest.mark.slow
@pytest.mark.compile
def test_compile_fuses_the_chain_into_one_compiled_call():
    r = quick("fused", {"n": 10_000}, backend="torch", compile="default")
    assert r.status == "ok" and r.check_ok and r.compile_s is not None, r.message
    counts = [n for n in r.notes if n.startswith("kernels per step")]
    assert counts and counts[0].startswith("kernels per step: 1 "), counts


# -- sparse ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csr", "dense"])
@pytest.mark.parametrize("op", ["spmv", "spmm"])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_sparse_products_match_float64(backend, op, fmt):
    pytest.importorskip("scipy")
    r = quick(
        "sparse",
        {"n": 96, "density": 0.05, "op": op, "k": 8, "format": fmt},
        backend=backend,
        dtype="float64",
    )
    assert r.status == "ok", r.message
    assert r.check_ok and r.error < 1e-12


def test_sparse_prepare_builds_csr_outside_the_step():
    pytest.importorskip("scipy")
    import numpy as np
    import scipy.sparse
    import torch

    w = get_workload("sparse")
    p = w.resolve({"n": 32, "density": 0.1})
    a, x = w.inputs(p, np.random.default_rng(0))
    assert scipy.sparse.issparse(w.prepare("numpy", "cpu", (a, x), p)[0])
    t = w.prepare("torch", "cpu", (torch.from_numpy(a), torch.from_numpy(x)), p)[0]
    assert t.layout == torch.sparse_csr and t.values().numel() == round(0.1 * 32 * 32)


def test_sparse_flops_count_nonzeros_only_in_csr():
    w = get_workload("sparse")
    csr = w.flops(w.resolve({"n": 1000, "density": 0.01}))
    dense = w.flops(w.resolve({"n": 1000, "density": 0.01, "format": "dense"}))
    assert dense == pytest.approx(100 * csr)


def test_sparse_without_scipy_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.sparse", None)
    r = quick("sparse", {"n": 32}, backend="numpy")
    assert r.status == "refused" and "SciPy is not installed" in r.message


# -- profile -----------------------------------------------------------------------
def test_profile_of_a_torch_cpu_run(tmp_path):
    trace = tmp_path / "trace.json"
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", warmup=1)
    data = profile_spec(spec, steps=3, trace=str(trace))
    assert data["status"] == "ok", data.get("message")
    assert data["activities"] == ["cpu"] and data["steps"] == 3
    assert data["kernels_per_step"] == 1  # one aten::mm per step
    assert data["top_ops"][0]["name"] in ("aten::mm", "aten::matmul")
    assert data["top_ops"][0]["calls"] == 1
    assert 0 < data["busy_ms_per_step"] <= data["wall_ms_per_step"]
    assert 0.0 <= data["overhead_share"] <= 1.0 and data["overhead_definition"]
    assert data["top_kernels"] == []  # no CUDA activity on a CPU
    assert json.loads(trace.read_text())["traceEvents"]
    json.dumps(data)  # plain data


def test_profile_counts_every_op_of_an_op_by_op_chain():
    data = profile_spec(RunSpec.make("fused", {"n": 1000}, backend="torch", warmup=1), steps=2)
    assert data["kernels_per_step"] == 9
    names = {o["name"] for o in data["top_ops"]}
    assert {"aten::mul", "aten::tanh", "aten::add"} <= names


def test_profile_refuses_numpy_and_impossible_configs_with_reasons():
    np_data = profile_spec(RunSpec.make("matmul", {"n": 32}))
    assert np_data["status"] == "refused" and "cProfile" in np_data["message"]
    bad = profile_spec(RunSpec.make("attention", {**ATT, "sdpa": "cudnn"}, backend="torch"))
    assert bad["status"] == "refused" and "No viable backend" in bad["message"]


def test_profile_trace_to_an_unwritable_path_says_so(tmp_path):
    data = profile_spec(
        RunSpec.make("matmul", {"n": 32}, backend="torch", warmup=1),
        steps=1,
        trace=str(tmp_path / "no" / "t.json"),
    )
    assert (
        data["status"] == "ok" and data["trace"] is None and "cannot write the trace" in data["trace_error"]
    )


def test_checking_the_levers_never_imports_torch():
    import subprocess

    probe = (
        "import sys\nfrom gpuplay.core.workloads import get_workload\n"
        "a = get_workload('attention'); i = get_workload('inference')\n"
        "a.unsupported('torch', 'cpu', 'float32', a.resolve({'sdpa': 'cudnn'}))\n"
        "i.unsupported('torch', 'cpu', 'float32', i.resolve({'quant': 'int8'}))\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_timed_transfers_are_refused_for_workloads_that_prepare_inputs(monkeypatch):
    from gpuplay.core.catalogue import planner
    from gpuplay.core.spec import Plan

    monkeypatch.setattr(planner, "device_refusal", lambda *a, **k: None)  # pretend a GPU is here
    spec = RunSpec.make("sparse", {"n": 32}, backend="torch", device="cuda:0", transfers=True)
    verdict = planner.check(spec, 0)
    assert not isinstance(verdict, Plan) and "outside the timing" in str(verdict)
    fused = RunSpec.make("fused", {"n": 32}, backend="torch", device="cuda:0", transfers=True)
    assert isinstance(planner.check(fused, 0), Plan)  # no prepare step: transfers can be timed
