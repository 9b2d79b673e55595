"""The tf32 lever as torch 2.13 reads it: its legacy and new precision APIs agree inside a run.

torch 2.9+ has two APIs for float32 matmul precision; on torch 2.13, setting only the new
fp32_precision attributes makes every legacy getter raise ("mix of the legacy and new APIs"),
and inductor's GEMM autotuning reads one (torch.get_float32_matmul_precision). These run on the
installed CPU torch, whose precision flags are the CUDA build's.
"""

from __future__ import annotations

import pytest

from gpuplay.core.backends.torch_backend import fp32_matmul_precision
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from tests.unit.gpu_fakes import FakeCuda, install_cuda_run

torch = pytest.importorskip("torch")


def _legacy() -> tuple[str, bool, bool]:
    """What the legacy getters answer (each raises where the two APIs disagree)."""
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )


def _new() -> tuple[str, ...]:
    b = torch.backends
    return (b.cuda.matmul.fp32_precision, b.cudnn.fp32_precision, b.cudnn.conv.fp32_precision,
            b.cudnn.rnn.fp32_precision, b.mkldnn.matmul.fp32_precision)  # fmt: skip


@pytest.mark.parametrize(("tf32", "legacy", "new"), [
    (True, ("high", True, True), "tf32"),
    (False, ("highest", False, False), "ieee"),
])  # fmt: skip
def test_both_precision_apis_answer_alike_inside_the_setting_and_are_restored(tf32, legacy, new):
    before_legacy, before_new = _legacy(), _new()
    with fp32_matmul_precision(torch, tf32):
        assert _legacy() == legacy
        assert _new()[:4] == (new,) * 4
        assert _new()[4] == before_new[4]  # oneDNN's CPU matmul is left as it was
        with fp32_matmul_precision(torch, not tf32):  # nested (the roofline's probe inside a run)
            assert _legacy()[0] == ("highest" if tf32 else "high")
        assert _legacy() == legacy
    assert _legacy() == before_legacy and _new() == before_new


def _reads_the_legacy_precision(monkeypatch) -> list[str]:
    """torch.compile as inductor behaves under max-autotune: its first call tunes the GEMMs, keyed
    by torch.get_float32_matmul_precision() (_inductor/select_algorithm.py), then runs them."""
    from gpuplay.core.backends import torch_backend

    seen: list[str] = []

    def compile(self, fn, mode):
        def compiled(*args):
            seen.append(torch.get_float32_matmul_precision())
            return fn(*args)

        return compiled

    monkeypatch.setattr(torch_backend.TorchBackend, "compile", compile)
    monkeypatch.setattr(torch_backend.TorchBackend, "compile_counts", lambda self: None)
    return seen


@pytest.mark.gpu_fake
@pytest.mark.parametrize("tf32", [True, False])
def test_tf32_with_max_autotune_on_cuda_is_measured_compiled(monkeypatch, tf32):
    cuda = FakeCuda()
    install_cuda_run(monkeypatch, cuda)
    seen = _reads_the_legacy_precision(monkeypatch)
    spec = RunSpec.make("matmul", {"n": 32}, backend="torch", device="cuda:0", tf32=tf32,
                        compile="max-autotune", warmup=1, repeat=3, energy=False, check=False)  # fmt: skip
    r = run(spec)
    assert r.status == "ok", r.message
    assert r.conditions["compile"] == "max-autotune", (r.conditions["compile"], r.notes)
    assert r.failure != "compile" and not any("EAGER" in n for n in r.notes)
    assert seen and set(seen) == {"high" if tf32 else "highest"}
    assert r.conditions["fp32_precision"].startswith("TF32" if tf32 else "IEEE")
