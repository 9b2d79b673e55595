"""Does gpuplay's median agree with the reference timers? (a benchmark, not a test)

For each workload on PyTorch (CPU here; CUDA if asked and present), gpuplay's
median against torch.utils.benchmark.Timer(...).blocked_autorange() with the
same thread count; for NumPy, against timeit. Each pair is measured in
alternating rounds (A B A B …), and the ratio is the median of the rounds'
paired ratios A/B, so slow drift of a shared machine cancels. Also prints the
harness overhead of an empty step. Goal: every ratio within 0.97–1.03; empty
step ≤ 2 µs.

    python benchmarks/timing_fidelity.py [--preset quick] [--device cpu] [--budget 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import timeit

from gpuplay.core.backends import get_backend
from gpuplay.core.backends.base import host_timer
from gpuplay.core.report import environment
from gpuplay.core.runner import build_step, host_inputs, run, timed_loop
from gpuplay.core.scenarios import load_scenarios
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload


def make_step(spec: RunSpec):
    w = get_workload(spec.workload)
    b = get_backend(spec.backend)
    p = w.effective(w.resolve(spec.params), b.name, spec.dtype)
    args = tuple(b.from_host(a, spec.device, spec.dtype) for a in host_inputs(w, p, spec.seed))
    return build_step(spec, w, b, p, args)


def gpuplay_median(spec: RunSpec) -> float:
    r = run(spec)
    assert r.status == "ok", r.message
    return r.median


def torch_reference(spec: RunSpec, budget: float) -> float:
    import torch.utils.benchmark as tb

    step = make_step(spec)
    for _ in range(spec.warmup):
        step()
    timer = tb.Timer(stmt="step()", globals={"step": step}, num_threads=spec.threads)
    return timer.blocked_autorange(min_run_time=budget).median


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timed steps per measurement")
    ap.add_argument("--threads", type=int, default=None, help="default: torch's own count")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--rounds", type=int, default=7, help="A/B alternations per pair")
    args = ap.parse_args()

    import torch

    threads = args.threads or torch.get_num_threads()
    env = environment()
    print(
        f"# timing fidelity · {env['cpu']} ({env['cores']} cores) · torch {env.get('torch')} · "
        f"numpy {env.get('numpy')} · {threads} thread(s) · preset {args.preset} · device {args.device}"
    )

    empty = timed_loop(lambda: None, host_timer, phase="timed", count=200_000, cancel=threading.Event())
    print(
        f"harness overhead of an empty step (median of 200,000): {statistics.median(empty.samples) * 1e9:.0f} ns"
    )

    scenarios = load_scenarios().scenarios
    print(
        f"{'workload':16s} {'backend':8s} {'gpuplay':>10s} {'reference':>10s} {'ratio':>7s}  reference timer"
    )
    ratios = []
    for sc in scenarios.values():
        if args.only and sc.name not in args.only:
            continue
        params = sc.preset_params(args.preset)
        for backend, ref_name, ref in (
            ("torch", "torch.utils.benchmark blocked_autorange", torch_reference),
            ("numpy", "timeit", timeit_reference),
        ):
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
            a, b = [], []
            for _ in range(args.rounds):  # alternate, so drift and thermal state hit both sides alike
                a.append(gpuplay_median(spec))
                b.append(ref(spec, args.budget))
            ratio = statistics.median(x / y for x, y in zip(a, b))  # paired: drift hits both alike
            ratios.append(ratio)
            flag = "" if 0.97 <= ratio <= 1.03 else "  <-- outside 0.97–1.03"
            spread = f"rounds {min(x / y for x, y in zip(a, b)):.3f}–{max(x / y for x, y in zip(a, b)):.3f}"
            print(
                f"{sc.name:16s} {backend:8s} {statistics.median(a) * 1e3:8.3f}ms "
                f"{statistics.median(b) * 1e3:8.3f}ms {ratio:7.3f}  {spread}  {ref_name}{flag}",
                flush=True,
            )
    inside = sum(0.97 <= r <= 1.03 for r in ratios)
    print(f"{inside}/{len(ratios)} ratios within 0.97–1.03; range {min(ratios):.3f}–{max(ratios):.3f}")


if __name__ == "__main__":
    main()
