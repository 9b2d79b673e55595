"""How wide is a paired speedup's interval, and how often does it cover a long run's speedup?
(a benchmark, not a test)

For each configuration, one long interleaved run of ABBA pairs (NumPy baseline A, the
configuration B, as gpuplay's runner.paired times them) is cut into consecutive blocks of k
pairs. For each k:

- width: the median over blocks of high/low of the block's 95% bootstrap interval (1.00 would
  be a perfectly steady machine; gpuplay marks a figure when it exceeds 1.2);
- coverage: how often a block's interval holds the speedup of the whole long run (the median
  of all its per-pair ratios), the closest thing to a true value a shared machine offers;
- unpaired: the same, for the ratio of medians of A from one block and B from the next (two
  measurements taken apart, as a baseline measured earlier is), with an interval from
  resampling each side on its own. It shows what pairing buys when the machine drifts.

    python benchmarks/paired_speedup.py [--pairs 240] [--ks 4 8 16 32 64] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time

import numpy as np

from gpuplay.core.hw.system import cpu_count, cpu_name
from gpuplay.core.measure.stats import paired_speedup
from gpuplay.core.runner import build_step, device_inputs, resolve
from gpuplay.core.runner.paired import inner_count, interleave
from gpuplay.core.spec import RunSpec
from gpuplay.core.studies.compare import baseline_spec

CONFIGS = [
    ("matmul", {"n": 128}),
    ("elementwise", {"n": 1_000_000}),
    ("fft2d", {"n": 256}),
]


def prepared(spec: RunSpec, stack: contextlib.ExitStack):
    plan = resolve(spec)
    if not hasattr(plan, "backend"):
        raise SystemExit(f"{spec.label()} cannot run here: {plan}")
    stack.enter_context(plan.backend.configured(spec))
    step = build_step(plan, device_inputs(plan))
    timer = plan.backend.step_timer(spec.device)
    warm = [timer(step)[0] for _ in range(5)]
    return step, timer, inner_count(warm)


def unpaired_interval(a: np.ndarray, b: np.ndarray, seed: int = 0, resamples: int = 2000):
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, a.size, (resamples, a.size))
    ib = rng.integers(0, b.size, (resamples, b.size))
    meds = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    lo, hi = np.quantile(meds, [0.025, 0.975])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=240)
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 8, 16, 32, 64])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", default="torch")
    args = ap.parse_args()
    print(
        f"# {cpu_name()} ({cpu_count()} cores), threads {args.threads}, {args.pairs} pairs per configuration"
    )
    print(f"# started {time.strftime('%Y-%m-%d %H:%M:%S')}")
    for workload, params in CONFIGS:
        spec = RunSpec.make(workload, params, backend=args.backend, threads=args.threads)
        base = baseline_spec(spec)
        with contextlib.ExitStack() as stack:
            b_step, b_timer, b_inner = prepared(spec, stack)
            a_step, a_timer, a_inner = prepared(base, stack)
            t0 = time.perf_counter()
            out = interleave(a_step, a_timer, a_inner, b_step, b_timer, b_inner, pairs=args.pairs,
                             budget_s=None, min_pairs=1, max_pairs=args.pairs, cancel=threading.Event())  # fmt: skip
            took = time.perf_counter() - t0
        a, b = np.asarray(out.baseline), np.asarray(out.candidate)
        whole = paired_speedup(a, b)
        assert whole is not None
        print(f"\n{spec.label()} vs {base.label()} · {workload} {params} · {took:.1f} s")
        print(f"  long run: {whole.point:.3g}× (95% {whole.low:.3g}–{whole.high:.3g}, {whole.pairs} pairs); "
              f"A median {np.median(a) * 1e3:.3g} ms, B median {np.median(b) * 1e3:.3g} ms")  # fmt: skip
        print("     k  blocks  paired width  paired coverage  unpaired width  unpaired coverage")
        for k in args.ks:
            blocks = [(a[i : i + k], b[i : i + k]) for i in range(0, a.size - k + 1, k)]
            if len(blocks) < 2:
                continue
            widths, covers, u_widths, u_covers = [], [], [], []
            for j, (ba, bb) in enumerate(blocks):
                s = paired_speedup(ba, bb, seed=j)
                if s is not None and s.low is not None and s.high is not None:
                    widths.append(s.high / s.low)
                    covers.append(s.low <= whole.point <= s.high)
                if j + 1 < len(blocks):  # A measured in this block, B in the next: apart in time
                    _, lo, hi = unpaired_interval(ba, blocks[j + 1][1], seed=j)
                    u_widths.append(hi / lo)
                    u_covers.append(lo <= whole.point <= hi)
            print(f"  {k:4d}  {len(blocks):6d}  {np.median(widths):12.2f}  {np.mean(covers):15.0%}  "
                  f"{np.median(u_widths):14.2f}  {np.mean(u_covers):17.0%}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
