"""A user code file's float64 check can fail in half precision: a wrong bfloat16 result is caught."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads.usercode import UserCodeError, code_ref, load

MATMUL = """
PARAMS = {"n": 256}
{growth}

def inputs(rng, n):
    return rng.standard_normal((n, n)), rng.standard_normal((n, n))

def flops(n):
    return 2.0 * n**3

def step(xp, a, b):
    c = a @ b
    {perturb}
    return c
"""
# One element of the product 50 times too large, except in the float64 reference run (the same
# step computes it): a wrong answer any check must see.
PERTURB = "if 'float64' not in str(c.dtype): c[0, 0] = c[0, 0] * 50 + 50"


def code(tmp_path: Path, *, perturb: bool = False, growth: str = "", name: str = "mm.py") -> Path:
    text = MATMUL.replace("{growth}", growth).replace("{perturb}", PERTURB if perturb else "pass")
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_bf16(path: Path, n: int = 256):
    spec = RunSpec.make(code_ref(path), {"n": n}, backend="torch", dtype="bfloat16", warmup=1, repeat=2)
    r = run(spec)
    assert r.status == "ok", (r.message, r.detail)
    return r


@pytest.mark.parametrize("growth", ["", 'ERROR_GROWTH = ("dot", "n")'])
def test_a_perturbed_bfloat16_matmul_fails_and_an_honest_one_passes(tmp_path, growth):
    bad = run_bf16(code(tmp_path, perturb=True, growth=growth, name="bad.py"))
    assert bad.check_ok is False, (bad.error, bad.tolerance)
    good = run_bf16(code(tmp_path, growth=growth, name="good.py"))
    assert good.check_ok, (good.error, good.tolerance)


def test_the_default_and_a_declared_growth_come_from_the_tolerance_formulas(tmp_path):
    from gpuplay.core.workloads import tolerance as tol

    plain = load(code(tmp_path, name="plain.py"))
    declared = load(code(tmp_path, growth='ERROR_GROWTH = ("dot", "n")', name="dot.py"))
    p = {"n": 2048}
    assert declared.tolerance("bfloat16", p) == pytest.approx(tol.dot("bfloat16", 2048))  # 0.031, as built in
    assert plain.tolerance("bfloat16", p) < 0.035  # element-wise in bfloat16, no growth in its u
    assert plain.tolerance("float32", p) > 10 * 2.0**-23  # float32 checks keep their room
    stated = load(code(tmp_path, growth='TOLERANCE = {"bfloat16": 0.5}', name="stated.py"))
    assert stated.tolerance("bfloat16", p) == 0.5  # an explicit TOLERANCE still wins


@pytest.mark.parametrize("growth", ['"quadratic"', '("dot", "m")', '("dot", 0)', '("fft",)'])
def test_a_bad_error_growth_is_refused_with_what_is_accepted(tmp_path, growth):
    w = load(code(tmp_path, growth=f"ERROR_GROWTH = {growth}", name="bad_growth.py"))
    with pytest.raises(UserCodeError, match="ERROR_GROWTH must be 'elementwise' or"):
        w.tolerance("bfloat16", {"n": 64})
