"""A user's code file as a workload: the examples on real NumPy and PyTorch, and every bad file."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gpuplay.core.catalogue.scenarios import ScenarioError, load_scenarios, parse_scenario, scenario_for
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.storage.config import load_config
from gpuplay.core.workloads import get_workload
from gpuplay.core.workloads.usercode import UserCodeError, code_ref, frame_lines, inspect_code, load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = ["softmax", "gaussian_blur", "monte_carlo_pi", "mandelbrot", "nbody"]

GOOD = """
PARAMS = {"n": 1000}

def inputs(rng, n):
    return rng.standard_normal(n)

def step(xp, x):
    return xp.sin(x) * 2.0
"""


def write(tmp_path: Path, text: str, name: str = "user.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def spec_for(path: Path, **kw) -> RunSpec:
    kw.setdefault("warmup", 1)
    kw.setdefault("repeat", 2)
    return RunSpec.make(code_ref(path), kw.pop("params", {}), **kw)


# -- the examples -----------------------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("name", NAMES)
def test_example_matches_the_float64_numpy_run(name, backend):
    sc = scenario_for(EXAMPLES / f"{name}.py")
    params = sc.preset_params("quick")
    r = run(RunSpec.make(sc.workload, params, backend=backend, warmup=1, repeat=2))
    assert r.status == "ok", (r.message, r.detail)
    assert r.check_ok, f"{name} on {backend}: error {r.error} > {r.tolerance}"
    assert r.flops > 0 and r.bytes > 0 and r.conditions["code_sha256"]
    # The reference really is the same function in float64: run it by hand.
    w = get_workload(sc.workload)
    hosts = w.inputs(params, np.random.default_rng(0))
    import array_api_compat.numpy as xp

    by_hand = w.module().step(xp, *(h.astype(np.float64) for h in hosts), **w.kernel_kwargs(params))
    by_hand = np.concatenate([np.ravel(a) for a in by_hand]) if isinstance(by_hand, tuple) else by_hand
    np.testing.assert_allclose(w.reference(params, hosts), by_hand)


def test_examples_declare_title_presets_and_a_docstring():
    for name in NAMES:
        info = inspect_code(EXAMPLES / f"{name}.py")
        assert info.title and info.description and {"quick", "published"} <= set(info.presets)
        assert info.has_flops and info.has_bytes


# -- bad files: each says what and where ------------------------------------------------
def refusal(path: Path) -> str:
    r = run(spec_for(path))
    assert r.status in ("refused", "failed"), r.status
    return r.message


def test_missing_file(tmp_path):
    msg = refusal(tmp_path / "nope.py")
    assert "nope.py: no such file" in msg


def test_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "def step(xp, x):\n    return x +\n")
    with pytest.raises(UserCodeError) as info:
        load(path)
    assert info.value.summary.startswith("user.py:2: SyntaxError")
    assert "return x +" in info.value.detail
    assert "user.py:2: SyntaxError" in refusal(path)


def test_no_step(tmp_path):
    path = write(tmp_path, "def inputs(rng):\n    return rng.random(3)\n")
    assert "defines no step() function" in refusal(path)


@pytest.mark.parametrize(
    "signature, expected",
    [
        ("def step():", "must take the array namespace xp first"),
        ("def step(xp):", "takes xp but no arrays"),
        ("def step(xp, x=1):", "cannot have defaults"),
        ("def step(xp, x, *, scale):", "keyword-only argument(s) without defaults: scale"),
        ("async def step(xp, x):", "plain function"),
    ],
)
def test_wrong_step_signature(tmp_path, signature, expected):
    path = write(tmp_path, GOOD.replace("def step(xp, x):", signature))
    msg = refusal(path)
    assert expected in msg and "user.py:7" in msg


def test_inputs_missing_or_not_taking_params(tmp_path):
    assert "defines no inputs() function" in refusal(write(tmp_path, "def step(xp, x):\n    return x\n"))
    bad = GOOD.replace("def inputs(rng, n):", "def inputs(rng):")
    assert "inputs() does not accept parameter(s) n from PARAMS" in refusal(write(tmp_path, bad))


@pytest.mark.parametrize(
    "body, expected",
    [
        ("return [1.0, 2.0]", "inputs() must return NumPy arrays; #0 is float"),
        ("return 3", "must return a NumPy array or a tuple of them; got int"),
        ("return rng.random(n), rng.random(n)", "step() takes 1 array(s) after xp, but inputs() returned 2"),
    ],
)
def test_inputs_returning_non_arrays(tmp_path, body, expected):
    path = write(tmp_path, GOOD.replace("return rng.standard_normal(n)", body))
    r = run(spec_for(path))
    assert r.status == "failed" and r.failure == "user-code" and expected in r.message


@pytest.mark.parametrize("body, got", [("return 1.5", "float"), ("return x, 2.0", "tuple of ndarray, float")])
def test_step_returning_a_non_array(tmp_path, body, got):
    path = write(tmp_path, GOOD.replace("return xp.sin(x) * 2.0", body))
    r = run(spec_for(path))
    assert r.failure == "user-code"
    assert f"step() must return an array (or a tuple of arrays); got {got}" in r.message


def test_step_raising_shows_only_the_users_frames(tmp_path):
    path = write(
        tmp_path,
        GOOD.replace(
            "    return xp.sin(x) * 2.0",
            "    return helper(xp, x)\n\ndef helper(xp, x):\n    return xp.reshape(x, (7, 11))",
        ),
    )
    r = run(spec_for(path))
    assert r.status == "failed" and r.failure == "user-code"
    assert r.message.startswith("user.py:11: step() raised ValueError")
    assert f'File "{path}", line 8, in step' in r.detail
    assert f'File "{path}", line 11, in helper' in r.detail
    assert "xp.reshape(x, (7, 11))" in r.detail
    assert "site-packages" not in r.detail and "gpuplay" not in r.detail.replace(str(tmp_path), "")
    assert frame_lines(r.detail) == [8, 11]


def test_flops_raising_is_a_failed_result_not_an_exception(tmp_path):
    path = write(tmp_path, GOOD + "\ndef flops(n):\n    return 1 / 0\n")
    r = run(spec_for(path))
    assert r.status == "failed" and "flops() raised ZeroDivisionError" in r.message


def test_a_step_that_never_returns_is_cancelled(tmp_path, no_leaked_threads):
    if sys.gettrace() is not None:  # coverage's tracer: docs/testing.md, "Coverage"
        pytest.skip("hangs under a trace function on Python 3.11 (coverage's): .ci/run runs it without --cov")
    path = write(
        tmp_path,
        GOOD.replace("    return xp.sin(x) * 2.0", "    while True:\n        x = x + 1\n    return x"),
    )
    cancel = threading.Event()
    results = []
    worker = threading.Thread(target=lambda: results.append(run(spec_for(path), cancel=cancel)))
    worker.start()
    time.sleep(0.5)
    assert worker.is_alive(), "the endless step should still be running"
    t0 = time.perf_counter()
    cancel.set()
    worker.join(5)
    assert not worker.is_alive(), "cancel did not stop a Python loop in the user's step"
    assert time.perf_counter() - t0 < 2
    assert results[0].status == "cancelled" and results[0].message == "cancelled by the user"


def test_a_cancel_after_the_run_leaves_nothing_pending(tmp_path):
    cancel = threading.Event()
    r = run(spec_for(write(tmp_path, GOOD)), cancel=cancel)
    assert r.status == "ok"
    cancel.set()
    time.sleep(0.3)  # no asynchronous exception may land here
    assert sum(range(1000)) == 499500


def test_import_error_in_the_file(tmp_path):
    path = write(tmp_path, "import not_a_module_anywhere\n" + GOOD)
    r = run(spec_for(path))
    assert r.failure == "user-code" and "importing the file raised ModuleNotFoundError" in r.message
    assert "line 1, in <module>" in r.detail


def test_params_are_literal_and_checked(tmp_path):
    bad = GOOD.replace('PARAMS = {"n": 1000}', "PARAMS = dict(n=1000)")
    assert "PARAMS must be a literal" in refusal(write(tmp_path, bad))
    r = run(spec_for(write(tmp_path, GOOD), params={"n": "lots"}))
    assert r.status == "refused" and "n must be an integer" in r.message
    r = run(spec_for(write(tmp_path, GOOD), params={"m": 3}))
    assert "unknown parameter(s) m" in r.message


# -- loading, reloading, trust ------------------------------------------------------
def test_reading_a_file_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    path = write(tmp_path, f"open({str(marker)!r}, 'w').close()\n" + GOOD)
    w = get_workload(code_ref(path))
    assert w.params[0].name == "n" and w.source("numpy", {}).startswith("open(")
    assert not marker.exists()
    run(spec_for(path))
    assert marker.exists()


def test_a_changed_file_is_reloaded_and_its_reference_recomputed(tmp_path):
    path = write(tmp_path, GOOD)
    first = get_workload(code_ref(path))
    r1 = run(spec_for(path, dtype="float64"))
    path.write_text(textwrap.dedent(GOOD).replace("* 2.0", "* 3.0"))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = get_workload(code_ref(path))
    assert second is not first and second.cache_key != first.cache_key
    r2 = run(spec_for(path, dtype="float64"))
    assert r1.error == 0.0 and r2.error == 0.0  # each checked against its own version's reference
    assert r1.conditions["code_sha256"] != r2.conditions["code_sha256"]
    os.utime(path)  # touched, not changed: the same workload
    assert get_workload(code_ref(path)) is second


def test_a_scenario_can_never_name_code(tmp_path):
    for name in (code_ref(tmp_path / "evil.py"), "evil.py"):
        with pytest.raises(ScenarioError) as info:
            parse_scenario(f'name = "x"\nworkload = "{name}"\n', tmp_path / "x.toml")
        assert "a scenario file is data and can never run code" in str(info.value)
        assert "gpuplay run FILE.py" in str(info.value)


def test_code_in_a_scenario_folder_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "trap.py").write_text(f"open({str(marker)!r}, 'w').close()\n" + textwrap.dedent(GOOD))
    (tmp_path / "trap.toml").write_text(f'name = "trap"\nworkload = "{code_ref(tmp_path / "trap.py")}"\n')
    sset = load_scenarios([tmp_path])
    assert "trap" not in sset.scenarios
    assert any("never run code" in str(e) for e in sset.errors)
    assert not marker.exists()


def test_config_lists_code_files_relative_to_itself(tmp_path):
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text('code_files = ["mine.py", "/abs/other.py"]\n')
    assert load_config(cfg_file).code_files == [tmp_path / "mine.py", Path("/abs/other.py")]
    cfg_file.write_text("code_files = 3\n")
    assert "code_files must be a list" in load_config(cfg_file).problems[0]


def test_cupy_is_refused_with_the_reason_here(tmp_path):
    pytest.importorskip("array_api_compat")
    r = run(spec_for(write(tmp_path, GOOD), backend="cupy", device="cuda"))
    try:
        import cupy  # noqa: F401

        has_cupy = True
    except ImportError:
        has_cupy = False
    if not has_cupy:
        assert r.status == "refused" and "CuPy" in r.message


def test_torch_cuda_is_refused_with_the_reason_here(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = run(spec_for(write(tmp_path, GOOD), backend="torch", device="cuda"))
    assert r.status == "refused" and r.message


@pytest.mark.slow
def test_torch_compile_traces_the_users_step_cleanly():
    sc = scenario_for(EXAMPLES / "softmax.py")
    r = run(
        RunSpec.make(sc.workload, sc.preset_params("quick"), backend="torch", compile="default", repeat=3)
    )
    assert r.status == "ok" and r.failure == "" and r.compile_s and r.compile_s > 0
    assert r.conditions["compile"] == "default" and r.check_ok


def test_the_file_imports_like_a_script_beside_its_helpers(tmp_path):
    (tmp_path / "helpers_for_mine.py").write_text("SCALE = 3.0\n")
    path = write(
        tmp_path,
        "from dataclasses import dataclass\nfrom helpers_for_mine import SCALE\n\n"
        "@dataclass\nclass Box:\n    k: float = SCALE\n"
        + GOOD.replace("* 2.0", "* Box().k")
        + '\nif __name__ == "__main__":\n    raise SystemExit("not under gpuplay")\n',
    )
    r = run(spec_for(path))
    assert r.status == "ok" and r.check_ok, (r.message, r.detail)


def test_listing_and_showing_a_code_file_imports_no_array_library(tmp_path):
    import subprocess
    import sys

    path = write(tmp_path, "import torch\n" + GOOD)
    script = (
        "import sys\n"
        "from gpuplay.core.catalogue.scenarios import scenario_for\n"
        "from gpuplay.core.workloads import get_workload\n"
        f"sc = scenario_for({str(path)!r}); w = get_workload(sc.workload)\n"
        "w.resolve({}); w.source('torch', {}); sc.preset_params(None)\n"
        "print(sorted(m for m in ('torch', 'cupy', 'array_api_compat.torch') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_amp_eligibility_is_read_from_the_code(tmp_path):
    from gpuplay.core.catalogue.planner import compute_dtype

    plain = spec_for(write(tmp_path, GOOD, "plain.py"), backend="torch", amp="bf16")
    mm = spec_for(
        write(tmp_path, GOOD.replace("xp.sin(x) * 2.0", "xp.sin(x) * (x @ x)"), "mm.py"),
        backend="torch",
        amp="bf16",
    )
    assert compute_dtype(plain) == "float32" and compute_dtype(mm) == "bfloat16"
    r = run(mm)
    assert r.status == "ok" and r.compute_dtype == "bfloat16" and r.check_ok, (r.error, r.tolerance)
