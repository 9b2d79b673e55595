"""Tolerances that can fail: from each dtype's unit roundoff and each operation's error growth."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

from gpuplay.core.backends.torch_backend import TorchBackend
from gpuplay.core.runner.measure import host_widened, tolerance_dtype
from gpuplay.core.runner.plan import RunPlan
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload, relative_error
from gpuplay.core.workloads import tolerance as tol

DTYPES = ("float64", "float32", "tf32", "bfloat16", "float16")


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 with its mantissa rounded to TF32's 10 bits, as a tensor core reads it."""
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _matmul_in(dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if dtype == "tf32":
        return _round_tf32(a).astype(np.float64) @ _round_tf32(b).astype(np.float64)
    t = getattr(torch, dtype)
    return (torch.from_numpy(a).to(t) @ torch.from_numpy(b).to(t)).double().numpy()


def test_unit_roundoffs_and_the_bf16_matmul_bound():
    assert [tol.unit_roundoff(d) for d in DTYPES] == [2**-53, 2**-24, 2**-11, 2**-8, 2**-11]
    matmul = get_workload("matmul")
    assert matmul.tolerance("bfloat16", {"n": 2048}) <= 0.1  # was 4·2^-7·√2048 = 1.41
    assert matmul.tolerance("bfloat16", {"n": 4096}) <= 0.1
    with pytest.raises(ValueError):
        tol.unit_roundoff("int8")


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_matmul_check_passes_a_right_result_and_fails_wrong_ones(dtype):
    n = 128
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ref = a @ b
    limit = get_workload("matmul").tolerance(dtype, {"n": n})
    assert relative_error(_matmul_in(dtype, a, b), ref) <= limit
    assert relative_error(_matmul_in(dtype, a.T, b.T), ref) > limit  # inputs transposed
    perturbed = _matmul_in(dtype, a, b)
    perturbed[7, 11] += 0.1 * np.linalg.norm(ref)  # one element off by a tenth of the whole's norm
    assert relative_error(perturbed, ref) > limit
    assert relative_error(np.zeros_like(ref), ref) > limit  # garbage


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_elementwise_and_heat_checks_can_fail(dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(50_000)
    ref = np.sin(x) * np.exp(-(x**2))
    t = torch.from_numpy(x).to(getattr(torch, dtype))
    right = (torch.sin(t) * torch.exp(-(t**2))).double().numpy()
    limit = get_workload("elementwise").tolerance(dtype, {"n": x.size})
    assert relative_error(right, ref) <= limit
    wrong = right.copy()
    wrong[123] += 0.1 * np.linalg.norm(ref)
    assert relative_error(wrong, ref) > limit
    assert relative_error(np.cos(x) * np.exp(-(x**2)), ref) > limit  # the wrong formula
    assert get_workload("heat").tolerance(dtype, {"n": 64, "steps": 100}) < 0.35


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_fft_check_fails_a_wrong_transform(dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(4096)
    ref = np.fft.fft(x)
    limit = get_workload("fft1d").tolerance(dtype, {"n": x.size})
    assert relative_error(np.fft.fft(x.astype(dtype)), ref) <= limit
    assert relative_error(np.fft.ifft(x) * x.size, ref) > limit  # the conjugate transform
    wrong = np.fft.fft(x.astype(dtype)).astype(np.complex128)
    wrong[5] += 0.1 * np.linalg.norm(ref)
    assert relative_error(wrong, ref) > limit


def _plan(**kw: Any) -> RunPlan:
    spec = RunSpec.make("matmul", {"n": 64}, backend="torch", **kw)
    w = get_workload("matmul")
    return RunPlan(spec, w, TorchBackend(), kw.get("dtype", "float32"), w.resolve({"n": 64}))


@pytest.mark.gpu_fake
def test_a_tf32_run_is_checked_at_tf32_precision_and_passes():
    """a TF32 matmul fails a float32 tolerance; it must pass its own."""
    plan = _plan(device="cuda:0", tf32=True)
    assert tolerance_dtype(plan) == "tf32"
    assert tolerance_dtype(_plan(device="cuda:0")) == "float32"
    assert tolerance_dtype(_plan(tf32=True)) == "float32", "TF32 is a CUDA matmul mode only"
    n = 512
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    err = relative_error(_matmul_in("tf32", a, b), a @ b)
    w = get_workload("matmul")
    assert err > w.tolerance("float32", {"n": n}), "a TF32 result fails a float32 check"
    assert err <= w.tolerance(tolerance_dtype(plan), {"n": n})


class FakeDeviceTensor:
    """A tensor on a (fake) GPU that records on which device it is widened to float64."""

    def __init__(self, data: np.ndarray, device: str, log: list[tuple[str, str]]) -> None:
        self.data, self.device, self.log = data, device, log

    def detach(self) -> FakeDeviceTensor:
        return self

    def is_complex(self) -> bool:
        return bool(np.iscomplexobj(self.data))

    def is_floating_point(self) -> bool:
        return self.data.dtype.kind == "f"

    def to(self, dtype: Any) -> FakeDeviceTensor:
        if dtype in (torch.float64, torch.complex128):
            self.log.append(("widen", self.device))
        return FakeDeviceTensor(self.data.astype(np.float64), self.device, self.log)

    def double(self) -> FakeDeviceTensor:
        return self.to(torch.float64)

    def cpu(self) -> FakeDeviceTensor:
        self.log.append(("copy", self.device))
        return FakeDeviceTensor(self.data, "cpu", self.log)

    def numpy(self) -> np.ndarray:
        if self.device != "cpu":
            raise TypeError("can't convert cuda tensor to numpy: copy it to the host first")
        return self.data


@pytest.mark.gpu_fake
def test_the_check_copies_to_the_host_before_widening():
    """widening on the device doubles the result there and can run out of memory."""
    log: list[tuple[str, str]] = []
    out = FakeDeviceTensor(np.ones((4, 4), dtype=np.float16), "cuda:1", log)
    host = host_widened(TorchBackend(), out)
    assert host.dtype == np.float64 and host.shape == (4, 4)
    assert ("widen", "cuda:1") not in log, log
    assert log.index(("copy", "cuda:1")) < log.index(("widen", "cpu"))
    pair = host_widened(TorchBackend(), (FakeDeviceTensor(np.zeros(3, np.float32), "cuda:0", log),) * 2)
    assert len(pair) == 2 and all(e != ("widen", "cuda:0") for e in log)
    assert math.isfinite(float(host.sum()))


def test_the_checks_norm_is_linalg_norms_without_blas(monkeypatch):
    """relative_error sums squares itself: np.linalg.norm's BLAS dot wakes the BLAS threads, ~20 ms
    a call on a loaded machine, paid by every sweep point. Same figures as linalg.norm."""
    rng = np.random.default_rng(7)
    cases = [
        rng.standard_normal((300, 200)),
        rng.standard_normal(65_536).astype(np.float32),
        rng.standard_normal(999) + 1j * rng.standard_normal(999),
        np.arange(-50, 50),
    ]
    expected = [
        np.linalg.norm((x * 1.001 - x).ravel()) / np.linalg.norm(x.ravel()) for x in cases
    ]  # before BLAS is taken away below
    expected_zero = np.linalg.norm(np.ones(3))

    def no_blas(*a, **k):
        raise AssertionError("the check called BLAS")

    monkeypatch.setattr(np.linalg, "norm", no_blas)
    monkeypatch.setattr(np, "dot", no_blas)
    monkeypatch.setattr(np, "vdot", no_blas)
    for x, want in zip(cases, expected, strict=True):
        # float32's own norm sums in float32; the check sums in float64: close, not equal.
        assert relative_error(x * 1.001, x) == pytest.approx(want, rel=1e-6)
    assert relative_error(np.ones(3), np.zeros(3)) == pytest.approx(expected_zero)
    assert relative_error(np.array([1.0, np.nan]), np.ones(2)) == math.inf


# -- the check, in blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0,), (5,), (1 << 16,), ((1 << 16) + 1,), (3, (1 << 16) + 5), (7, 9, 11)])
@pytest.mark.parametrize("kind", ["float32 of float64", "complex64 of complex128"])
def test_the_blocked_check_is_the_whole_array_norm(shape, kind):
    import numpy as np

    from gpuplay.core.workloads import relative_error

    rng = np.random.default_rng(7)
    ref = rng.standard_normal(shape)
    if kind.startswith("complex"):
        ref = ref + 1j * rng.standard_normal(shape)
    out = (ref * (1 + 1e-6 * rng.standard_normal(shape))).astype(
        np.complex64 if ref.dtype.kind == "c" else np.float32
    )
    whole = (
        np.linalg.norm((out.astype(ref.dtype) - ref).ravel()) / np.linalg.norm(ref.ravel())
        if ref.size
        else 0.0
    )
    assert relative_error(out, ref) == pytest.approx(whole, rel=1e-12, abs=0.0)
    if ref.size:
        bad = out.copy().reshape(-1)
        bad[-1] = np.nan  # in the last block
        assert relative_error(bad.reshape(shape), ref) == float("inf")
    assert relative_error(np.zeros(shape), np.zeros(shape)) == 0.0
