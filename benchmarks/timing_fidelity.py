"""Does gpuplay's median agree with the timers a user would use? (a benchmark, not a test)

Two comparisons per workload and backend, each measured in paired, interleaved
rounds (A B, B A, A B, …) so slow drift of a shared machine hits both sides
alike; the ratio printed is the median of the rounds' paired ratios A/B, with
the range of the rounds beside it.

plain (default): gpuplay's `run()` in a fresh process against a plain script
    in a fresh process, as a user's own timing would be: inputs generated with
    NumPy in float64 and converted to the run's dtype (the float64 arrays
    dropped), threads limited by OMP_NUM_THREADS & co. (and
    torch.set_num_threads; both processes get the same environment), a few warm-up calls, then one
    `timeit.repeat(number=1)` of the same kernel function, median. Both report minor page faults per step
    (`getrusage`), the signature of the allocator's heap-trimming mode, and
    the main thread's CPU time per step (`time.thread_time`): with one thread
    the step runs on the main thread, and CPU time does not count the time a
    busy machine's scheduler keeps the process waiting, so its ratio stays
    readable when the wall-clock ratio drowns in other processes' load.
inprocess: gpuplay's median in this process against
    torch.utils.benchmark's blocked_autorange (PyTorch) or timeit (NumPy) on
    the same step callable.

Also prints the harness overhead of an empty step. Goal: every ratio within
0.97–1.03 on a quiet machine; empty step ≤ 2 µs.

    python benchmarks/timing_fidelity.py [--against plain|inprocess|both] [--preset quick]
        [--device cpu] [--budget 0.5] [--rounds 5] [--only heat fft2d] [--backends numpy torch]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import timeit
from typing import Any

from gpuplay.core.spec import RunSpec

GPUPLAY_SRC: str | None = None  # --gpuplay-src: time another checkout's run() (before/after figures)


def _faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# -- the two sides, each run in a fresh process -----------------------------------
def worker_gpuplay(spec: RunSpec) -> dict[str, Any]:
    from gpuplay.core.runner import run

    marks: list[float] = []

    def on_sample(phase: str, dt: float) -> None:
        if phase == "timed":
            marks.append(time.thread_time())

    f0 = _faults()
    r = run(spec, on_sample=on_sample)
    f1 = _faults()
    if r.status != "ok":
        raise SystemExit(f"gpuplay run {r.status}: {r.message}")
    faults = r.conditions.get("page_faults_per_step")
    if faults is None:  # an older gpuplay: the whole run's faults over its steps (an upper bound)
        faults = round((f1 - f0) / max(1, len(r.samples) + len(r.warmup)), 1)
    cpu = (marks[-1] - marks[0]) / max(1, len(marks) - 1)  # mean over steps, as timeit's total is
    return {"median": r.median, "cpu_per_step": cpu, "faults_per_step": faults}


def worker_plain(spec: RunSpec) -> dict[str, Any]:
    """A user's script: make the inputs, convert them, warm up, timeit the kernel."""
    from gpuplay.core.workloads import get_workload  # the same kernel code, nothing of the runner

    w = get_workload(spec.workload)
    p = w.effective(w.resolve(spec.params), spec.backend, spec.dtype)
    inputs = list(w.inputs(p, __import__("numpy").random.default_rng(spec.seed)))
    if spec.backend == "torch":
        import torch

        if spec.threads:
            torch.set_num_threads(spec.threads)
        dtype = getattr(torch, spec.dtype)
        args = [torch.from_numpy(inputs.pop(0)).to(device=spec.device, dtype=dtype) for _ in list(inputs)]
        xp: Any = torch
        sync = (lambda: torch.cuda.synchronize(spec.device)) if spec.device.startswith("cuda") else None
    else:
        import numpy as np

        args = [inputs.pop(0).astype(getattr(np, spec.dtype)) for _ in list(inputs)]
        xp, sync = np, None
    kernel = w.kernel(spec.backend, xp, p)

    def call() -> None:
        kernel(*args)
        if sync is not None:
            sync()

    for _ in range(spec.warmup):
        call()
    timer = timeit.Timer(call)
    # A user's timeit: one repeat() call, one step per repeat, as many as fill the budget.
    per_step = max(1e-6, timer.timeit(1))
    repeats = max(spec.min_repeat, int(spec.budget_s / per_step))
    f0 = _faults()
    c0 = time.thread_time()
    times = timer.repeat(repeat=repeats, number=1)
    cpu = (time.thread_time() - c0) / repeats
    f1 = _faults()
    return {
        "median": statistics.median(times),
        "cpu_per_step": cpu,
        "faults_per_step": round((f1 - f0) / len(times), 1),
    }


def in_fresh_process(side: str, spec: RunSpec) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--worker", side, "--spec", json.dumps(spec.to_dict())]
    env = os.environ.copy()
    if side == "gpuplay" and GPUPLAY_SRC:
        env["PYTHONPATH"] = GPUPLAY_SRC
    if spec.threads:  # a user limits the BLAS's threads the usual way; both sides get the same
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(spec.threads)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{side} worker failed for {spec.label()}:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- in-process reference timers ----------------------------------------------------
def make_step(spec: RunSpec) -> Any:
    from gpuplay.core.runner import build_step, device_inputs, resolve

    plan = resolve(spec)
    assert not isinstance(plan, Exception) and hasattr(plan, "workload"), plan
    return build_step(plan, device_inputs(plan))  # type: ignore[arg-type]


def torch_reference(spec: RunSpec, budget: float) -> float:
    import torch.utils.benchmark as tb

    step = make_step(spec)
    for _ in range(spec.warmup):
        step()
    timer = tb.Timer(stmt="step()", globals={"step": step}, num_threads=spec.threads or 1)
    return float(timer.blocked_autorange(min_run_time=budget).median)


def timeit_reference(spec: RunSpec, budget: float) -> float:
    step = make_step(spec)
    for _ in range(spec.warmup):
        step()
    t = timeit.Timer(step)
    number, _ = t.autorange()  # calls per repeat so one repeat takes >= 0.2 s
    number = max(1, number // 4)
    repeats = max(5, int(budget / max(1e-9, t.timeit(number) / 1.0)))
    per_call = [x / number for x in t.repeat(repeat=min(repeats, 200), number=number)]
    return statistics.median(per_call)


def paired(a_fn: Any, b_fn: Any, rounds: int) -> tuple[list[Any], list[Any]]:
    """Interleaved rounds, alternating which side goes first."""
    a: list[Any] = []
    b: list[Any] = []
    for i in range(rounds):
        if i % 2 == 0:
            a.append(a_fn())
            b.append(b_fn())
        else:
            b.append(b_fn())
            a.append(a_fn())
    return a, b


def line(name: str, backend: str, a: list[float], b: list[float], ref_name: str, extra: str = "") -> float:
    rs = [x / y for x, y in zip(a, b, strict=True)]
    ratio = statistics.median(rs)
    flag = "" if 0.97 <= ratio <= 1.03 else "  <-- outside 0.97–1.03"
    print(
        f"{name:15s} {backend:6s} {statistics.median(a) * 1e3:9.3f}ms {statistics.median(b) * 1e3:9.3f}ms "
        f"{ratio:6.3f}  rounds {min(rs):.3f}–{max(rs):.3f}{extra}  {ref_name}{flag}",
        flush=True,
    )
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", choices=("plain", "inprocess", "both"), default="plain")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timed steps per measurement")
    ap.add_argument("--threads", type=int, default=None, help="default: torch's own count")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--backends", nargs="*", default=["torch", "numpy"])
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds per comparison")
    ap.add_argument("--gpuplay-src", default=None, help="time the run() of another checkout's src/")
    ap.add_argument("--worker", choices=("gpuplay", "plain"), help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    args = ap.parse_args()

    global GPUPLAY_SRC
    GPUPLAY_SRC = args.gpuplay_src
    if args.worker:
        spec = RunSpec.from_dict(json.loads(args.spec))
        print(json.dumps((worker_gpuplay if args.worker == "gpuplay" else worker_plain)(spec)))
        return

    import torch

    from gpuplay.core.backends.base import host_timer
    from gpuplay.core.catalogue.scenarios import load_scenarios
    from gpuplay.core.reports.report import environment
    from gpuplay.core.runner import run, timed_loop

    threads = args.threads or torch.get_num_threads()
    env = environment()
    print(
        f"# timing fidelity · {env['cpu']} ({env['cores']} cores) · torch {env.get('torch')} · "
        f"numpy {env.get('numpy')} · {threads} thread(s) · preset {args.preset} · device {args.device} · "
        f"{args.rounds} paired rounds of {args.budget} s"
        + (f" · gpuplay from {args.gpuplay_src}" if args.gpuplay_src else "")
    )
    empty = timed_loop(lambda: None, host_timer, phase="timed", count=200_000, cancel=threading.Event())
    print(
        f"harness overhead of an empty step (median of 200,000): {statistics.median(empty.samples) * 1e9:.0f} ns"
    )
    print(
        f"{'workload':15s} {'lib':6s} {'gpuplay':>11s} {'reference':>11s} {'ratio':>6s}  spread, faults/step, reference"
    )
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    for sc in load_scenarios().scenarios.values():
        if args.only and sc.name not in args.only:
            continue
        params = sc.preset_params(args.preset)
        for backend in args.backends:
            device = args.device if backend == "torch" else "cpu"
            spec = RunSpec.make(
                sc.workload,
                params,
                scenario=sc.name,
                backend=backend,
                device=device,
                threads=threads,
                budget_s=args.budget,
                warmup=3,
            )
            if args.against in ("plain", "both"):
                a, b = paired(
                    lambda s=spec: in_fresh_process("gpuplay", s),
                    lambda s=spec: in_fresh_process("plain", s),
                    args.rounds,
                )
                fa = statistics.median(x["faults_per_step"] or 0 for x in a)
                fb = statistics.median(x["faults_per_step"] or 0 for x in b)
                cpu = statistics.median(
                    x["cpu_per_step"] / y["cpu_per_step"] for x, y in zip(a, b, strict=True)
                )
                ratios.append(
                    line(
                        sc.name,
                        backend,
                        [x["median"] for x in a],
                        [x["median"] for x in b],
                        "plain script + timeit, fresh processes",
                        f"  cpu-time ratio {cpu:.3f}  faults/step {fa:.0f} vs {fb:.0f}",
                    )
                )
                cpu_ratios.append(cpu)
            if args.against in ("inprocess", "both"):
                ref, ref_name = (
                    (torch_reference, "blocked_autorange, in process")
                    if backend == "torch"
                    else (timeit_reference, "timeit, in process")
                )
                a2, b2 = paired(
                    lambda s=spec: run(s).median, lambda s=spec, r=ref: r(s, args.budget), args.rounds
                )
                ratios.append(line(sc.name, backend, a2, b2, ref_name))
    inside = sum(0.97 <= r <= 1.03 for r in ratios)
    print(f"{inside}/{len(ratios)} ratios within 0.97–1.03; range {min(ratios):.3f}–{max(ratios):.3f}")
    if cpu_ratios:
        inside = sum(0.97 <= r <= 1.03 for r in cpu_ratios)
        print(
            f"{inside}/{len(cpu_ratios)} cpu-time ratios within 0.97–1.03; "
            f"range {min(cpu_ratios):.3f}–{max(cpu_ratios):.3f}"
        )


if __name__ == "__main__":
    main()
