"""Fixed timings for layout snapshots and screenshots: the app shows them as if measured."""

from __future__ import annotations

import math

from gpuplay.core.result import RunResult
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload


def fixed_samples(median_s: float, n: int = 60, warmup: int = 3) -> list[tuple[str, float]]:
    out = [("warmup", median_s * (1.8 - 0.25 * i)) for i in range(warmup)]
    out += [
        ("timed", median_s * (1 + 0.04 * math.sin(1.7 * i) + (0.2 if i % 17 == 5 else 0))) for i in range(n)
    ]
    return out


def fixed_result(spec: RunSpec, median_s: float, error: float, compute: str | None = None) -> RunResult:
    w = get_workload(spec.workload)
    p = w.effective(w.resolve(spec.params), spec.backend, compute or spec.dtype)
    samples = fixed_samples(median_s)
    return RunResult(
        spec=spec,
        status="ok",
        samples=[dt for ph, dt in samples if ph == "timed"],
        warmup=[dt for ph, dt in samples if ph == "warmup"],
        setup_s=0.01,
        flops=w.flops(p),
        bytes=w.bytes_moved(p, 4),
        error=error,
        tolerance=w.tolerance(compute or spec.dtype, p),
        compute_dtype=compute or spec.dtype,
        size=w.size_label(p),
        conditions={
            "backend": spec.backend,
            "device": spec.device,
            "device_name": "Example CPU (2 cores)",
            "dtype": spec.dtype,
            "compute_dtype": compute or spec.dtype,
            "threads": {"cores": 2, "numpy_blas": 1, "torch_intraop": 1},
            "timer": "perf_counter_ns (synchronous)",
            "transfers_timed": False,
        },
    )


def feed(app, backend: str = "torch", amp: str = "off") -> None:
    """Put a NumPy baseline and one live configuration in the app, with fixed figures."""
    spec = app.spec.replace(backend=backend, amp=amp)
    base = app.spec.replace(backend="numpy")
    base_r = fixed_result(base, 0.0212, 3.1e-7)
    live_r = fixed_result(
        spec,
        0.0106 if amp == "off" else 0.0052,
        2.6e-7 if amp == "off" else 2.9e-3,
        "bfloat16" if amp == "bf16" else None,
    )
    # The speedup as the app measures it: paired with the baseline, with its interval.
    point = base_r.median / live_r.median
    live_r.speedup = {"point": point, "interval": [point * 0.97, point * 1.03], "pairs": 24,
                      "baseline_dtype": "float32", "baseline_median_s": base_r.median}  # fmt: skip
    s = app.session
    s.spec = spec
    s.results = [base_r, live_r]
    s.baselines = {base: base_r}
    s.speedups = {spec: live_r.speedup}
    s.samples = fixed_samples(live_r.median)
    s.live_result = live_r
    s.phase = "done"
    app.refresh_all()


def feed_dtypes(app) -> None:
    """A NumPy baseline and four PyTorch configurations that differ only in dtype or AMP: the
    rows a new user makes by pressing t and a, which must still read apart."""
    base = app.spec.replace(backend="numpy")
    base_r = fixed_result(base, 0.0212, 3.1e-7)
    torch = app.spec.replace(backend="torch")
    configs = [
        (torch, 0.0106, 2.6e-7, None),
        (torch.replace(dtype="bfloat16"), 0.0081, 3.1e-3, None),
        (torch.replace(dtype="float64"), 0.0229, 1.1e-15, None),
        (torch.replace(amp="fp16"), 0.0052, 2.9e-3, "float16"),
    ]
    s = app.session
    s.results = [base_r]
    s.speedups = {}
    for spec, median, error, compute in configs:
        r = fixed_result(spec, median, error, compute)
        point = base_r.median / r.median
        r.speedup = {"point": point, "interval": [point * 0.97, point * 1.03], "pairs": 24,
                     "baseline_dtype": "float32", "baseline_median_s": base_r.median}  # fmt: skip
        s.results.append(r)
        s.speedups[spec] = r.speedup
    live_r = s.results[-1]
    s.spec = live_r.spec
    s.baselines = {base: base_r}
    s.samples = fixed_samples(live_r.median)
    s.live_result = live_r
    s.phase = "done"
    app.refresh_all()
