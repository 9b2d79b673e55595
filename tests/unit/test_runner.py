"""The runner's phases, cancellation, pause, refusals and failures."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest

from gpuplay.core.catalogue.planner import check
from gpuplay.core.runner import run, timed_loop
from gpuplay.core.spec import Refusal, RunSpec, SpecError


def test_phases_come_in_order_and_samples_are_reported():
    phases, samples = [], []
    r = run(
        RunSpec.make("matmul", {"n": 64}, warmup=2, repeat=4),
        on_sample=lambda ph, dt: samples.append((ph, dt)),
        on_phase=lambda ph, d: phases.append(ph),
    )
    assert phases == ["estimate", "setup", "warmup", "timed", "check"]
    assert [ph for ph, _ in samples] == ["warmup"] * 2 + ["timed"] * 4
    assert [dt for ph, dt in samples if ph == "timed"] == r.samples
    assert r.setup_s is not None and r.setup_s >= 0
    s = r.summary
    assert s.n == 4 and s.min <= s.p25 <= s.median <= s.p75 <= s.max


def test_budget_gives_at_least_min_repeat_steps():
    r = run(RunSpec.make("matmul", {"n": 32}, budget_s=0.05, min_repeat=7, warmup=0))
    assert len(r.samples) >= 7


def test_cancel_stops_within_one_step():
    cancel = threading.Event()
    seen = []

    def on_sample(phase, dt):
        seen.append(phase)
        if phase == "timed" and seen.count("timed") == 3:
            cancel.set()

    r = run(RunSpec.make("matmul", {"n": 64}, warmup=1, repeat=1000), on_sample=on_sample, cancel=cancel)
    assert r.status == "cancelled"
    assert len(r.samples) == 3  # the step in flight finished; no further step started
    assert r.usable  # what was measured is kept


def test_cancel_from_another_thread_returns_promptly():
    cancel = threading.Event()
    spec = RunSpec.make("elementwise", {"n": 200_000}, warmup=0, budget_s=60.0)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", run(spec, cancel=cancel)))
    t.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    cancel.set()
    t.join(5)
    assert not t.is_alive()
    assert time.perf_counter() - t0 < 1.0
    assert out["r"].status == "cancelled"


def test_pause_holds_between_steps_without_counting_the_wait():
    pause = threading.Event()
    cancel = threading.Event()
    pause.set()
    released_at: list[float] = []

    def release() -> None:
        released_at.append(time.perf_counter())
        pause.clear()

    calls: list[float] = []

    def timer(fn):
        t0 = time.perf_counter()
        calls.append(t0)
        return time.perf_counter() - t0, fn()

    threading.Timer(0.3, release).start()
    t0 = time.perf_counter()
    out = timed_loop(lambda: None, timer, phase="timed", count=3, cancel=cancel, pause=pause)
    assert len(out.samples) == 3 and not out.cancelled
    # No step ran while paused, and the 0.3 s wait is in no sample.
    assert released_at and min(calls) >= released_at[0]
    assert time.perf_counter() - t0 >= 0.3 and max(out.samples) < 0.05


def test_cancel_ends_a_paused_loop():
    pause, cancel = threading.Event(), threading.Event()
    pause.set()
    threading.Timer(0.2, cancel.set).start()
    out = timed_loop(lambda: None, lambda fn: (0.0, fn()), phase="timed", count=3, cancel=cancel, pause=pause)
    assert out.cancelled and out.samples == []


def test_estimate_refuses_a_step_over_the_limit():
    r = run(RunSpec.make("matmul", {"n": 1024}, max_step_s=0.001))  # the smallest limit allowed
    assert r.status == "refused"
    assert "estimated" in r.message and "limit" in r.message
    assert r.estimate_s > 0.001


def test_exception_inside_workload_is_a_failed_result(monkeypatch):
    from gpuplay.core.workloads import pointwise

    def boom(self, backend, p):
        def kernel(xp, x):
            raise RuntimeError("kaboom inside the kernel")

        return kernel

    monkeypatch.setattr(pointwise.Elementwise, "kernel_function", boom)
    r = run(RunSpec.make("elementwise", {"n": 1000}))
    assert r.status == "failed" and "kaboom" in r.message and r.failure == "error"
    # and the next run works
    monkeypatch.undo()
    assert run(RunSpec.make("elementwise", {"n": 1000}, repeat=2)).status == "ok"


def test_memory_error_is_reported_as_out_of_memory(monkeypatch):
    from gpuplay.core.backends.numpy_backend import NumpyBackend

    def no_memory(self, host, device, dtype):
        raise MemoryError("Unable to allocate 64.0 GiB")

    monkeypatch.setattr(NumpyBackend, "from_host", no_memory)
    r = run(RunSpec.make("matmul", {"n": 64}))
    assert r.status == "failed" and r.failure == "out-of-memory"
    assert "out of memory" in r.message


def test_a_size_that_cannot_fit_is_refused_before_allocating():
    r = run(RunSpec.make("elementwise", {"n": 1 << 34}))
    assert r.status == "refused" and r.failure == "out-of-memory" and "GiB" in r.message


def test_half_precision_overflow_is_flagged_not_finite():
    r = run(RunSpec.make("reductions", {"n": 200_000}, backend="torch", dtype="float16", repeat=2, warmup=0))
    assert r.status == "ok"
    assert r.failure == "not-finite" and r.check_ok is False
    assert any("NaN or inf" in n for n in r.notes)


@pytest.mark.parametrize(
    "kw, reason",
    [
        ({"backend": "numpy", "amp": "bf16"}, "AMP is torch.autocast"),
        ({"backend": "cupy", "device": "cpu"}, "CuPy"),
        ({"backend": "numpy", "device": "cuda:0"}, "NumPy runs on the host CPU only"),
        ({"backend": "torch", "device": "cuda:0"}, "CPU-only build"),
        ({"backend": "numpy", "dtype": "bfloat16"}, "no bfloat16"),
        ({"backend": "torch", "tf32": True}, "TF32"),
        ({"backend": "numpy", "compile": "default"}, "torch.compile exists on PyTorch only"),
        ({"backend": "torch", "amp": "bf16", "dtype": "float64"}, "AMP autocasts float32"),
    ],
)
def test_nonsense_combinations_are_refused_with_reason(kw, reason):
    verdict = check(RunSpec.make("matmul", {"n": 64}, **kw))
    assert isinstance(verdict, Refusal)
    assert reason in str(verdict)


def test_amp_on_a_workload_without_eligible_ops_says_so():
    r = run(RunSpec.make("elementwise", {"n": 1000}, backend="torch", amp="bf16", repeat=2, warmup=0))
    assert r.status == "ok" and r.compute_dtype == "float32"
    assert any("no autocast-eligible op" in n for n in r.notes)


def test_amp_lowers_matmul_precision_and_the_error_shows_it():
    fp32 = run(RunSpec.make("matmul", {"n": 128}, backend="torch", repeat=2, warmup=0))
    bf16 = run(RunSpec.make("matmul", {"n": 128}, backend="torch", amp="bf16", repeat=2, warmup=0))
    assert bf16.compute_dtype == "bfloat16" and bf16.check_ok
    assert bf16.error > 100 * fp32.error


def test_conditions_carry_threads_dtype_and_timer():
    r = run(RunSpec.make("matmul", {"n": 64}, backend="torch", threads=1, repeat=2))
    c = r.conditions
    assert c["threads"]["torch_intraop"] == 1 and c["threads"]["cores"] >= 1
    assert c["dtype"] == "float32" and c["compute_dtype"] == "float32"
    assert c["timer"].startswith("perf_counter_ns")
    assert c["transfers_timed"] is False


def test_a_numpy_runs_conditions_read_blas_threads_once(monkeypatch):
    """threadpoolctl scans every loaded library (0.6-4 ms, more on a loaded machine), and a sweep
    pays it per point: NumPy's BLAS is found once, and its thread count is still read live."""
    import threadpoolctl

    from gpuplay.core.backends import numpy_backend

    def point():
        return run(RunSpec.make("matmul", {"n": 64}, backend="numpy", repeat=2, warmup=0, check=False))

    point()  # what a run imports is imported (a new import may load a BLAS: the libraries are found anew)
    scans = []
    real = threadpoolctl.ThreadpoolController.__init__
    monkeypatch.setattr(
        threadpoolctl.ThreadpoolController, "__init__", lambda self: scans.append(1) or real(self)
    )
    monkeypatch.setattr(numpy_backend, "_blas", None, raising=False)
    for _ in range(3):  # three points of a sweep: no --threads, so no threadpool_limits scans either
        r = point()
        assert r.conditions["threads"]["numpy_blas"] >= 1 and r.conditions["threads"]["cores"] >= 1
    assert len(scans) == 1
    # Live: a limit set after the libraries were found is what the next read says.
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        assert numpy_backend.blas_threads() == 1
    assert len(scans) == 2  # threadpool_limits' own scan, not blas_threads'


def test_threads_setting_is_restored_after_the_run():
    import torch

    before = torch.get_num_threads()
    run(RunSpec.make("matmul", {"n": 32}, backend="torch", threads=1, repeat=1))
    assert torch.get_num_threads() == before


def test_spec_rejects_bad_values():
    with pytest.raises(SpecError, match="backend"):
        RunSpec.make("matmul", backend="jax")
    with pytest.raises(SpecError, match="device"):
        RunSpec.make("matmul", device="gpu0")
    with pytest.raises(SpecError, match="repeat"):
        RunSpec.make("matmul", repeat=0)


def test_spec_round_trips_through_dict():
    spec = RunSpec.make("heat", {"n": 8, "steps": 2}, backend="torch", amp="bf16", threads=2)
    assert RunSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.compile
def test_compile_time_is_reported_apart_from_steps():
    r = run(
        RunSpec.make("elementwise", {"n": 10_000}, backend="torch", compile="default", repeat=3, warmup=1)
    )
    assert r.status == "ok", r.message
    assert r.compile_s is not None
    assert r.compile_s > 10 * max(r.samples)  # the first call compiles; the steps do not
    assert r.check_ok


@pytest.mark.slow
def test_compile_does_not_spill_torchs_script_method_deprecations():
    """torch.compile imports torch._inductor, whose mkldnn module uses torch.jit.script_method.

    A fresh interpreter with DeprecationWarnings as errors: the import happens here, not in
    some earlier test.
    """

    script = (
        "from gpuplay.core.runner import build_step\n"
        "from gpuplay.core.runner.plan import plan_run\n"
        "from gpuplay.core.spec import RunSpec\n"
        "spec = RunSpec.make('matmul', {'n': 8}, backend='torch', compile='default')\n"
        "build_step(plan_run(spec), ())\n"
        "import torch._inductor.compile_fx\n"
        "print('compiled step built')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning:torch.jit._script", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "compiled step built" in proc.stdout, proc.stderr[-1500:]


def test_a_reference_made_from_inputs_that_are_views_of_one_another(monkeypatch):
    # The set-up's inputs are shown to the reference read-only; an input that is a view of another
    # (a transpose beside its matrix) must come back writeable, and the set-up must not fail.
    from gpuplay.core.catalogue import planner
    from gpuplay.core.runner import clear_caches, run

    clear_caches()
    # The very workload object the run's planner finds, patched on the object: whatever an earlier
    # test left in the registry, the run generates its inputs through this method.
    workload = planner.get_workload("matmul")
    kept: list[np.ndarray] = []

    def transposed(self, p, rng):
        b = rng.standard_normal((p["n"], p["n"]))
        kept.append(b)
        return b.T, b  # the view first: its base is made read-only after it

    monkeypatch.setattr(workload, "inputs", types.MethodType(transposed, workload))
    try:
        r = run(RunSpec.make("matmul", {"n": 32}, budget_s=0.02, warmup=1, dtype="float64"))
    finally:
        # The reference of these patched inputs sits in the cache under matmul n=32's own key:
        # a later test's matmul n=32 would be checked against it.
        clear_caches()
    assert r.status == "ok", r.message
    assert r.check_ok and r.error is not None and r.error < r.tolerance
    assert kept and all(b.flags.writeable for b in kept)  # NumPy float64: the run's own inputs
