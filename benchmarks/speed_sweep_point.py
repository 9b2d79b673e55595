"""What one sweep point costs at a 0.1 s budget, whole process.

`gpuplay sweep elementwise --over n=4096..65536:K --backends numpy --budget 0.1 --warmup 1` for
K = 16 and K = 2: a point's cost is (wall of 16 − wall of 2) / 14, which leaves out the start-up
both share. Goal: at most 1.05 × the budget (the budget itself, the timed window, stays 0.1 s).

    python benchmarks/speed_sweep_point.py [-n 5] [--vs OTHER/src]
"""

from __future__ import annotations

from speedbench import header, med, parser, run_once

BUDGET_S = 0.1
GOAL = 1.05


def sweep(points: int) -> tuple[str, ...]:
    return ("sweep", "elementwise", "--over", f"n=4096..65536:{points}", "--backends", "numpy",
            "--budget", str(BUDGET_S), "--warmup", "1")  # fmt: skip


CPU: dict[str, list[float]] = {}


def per_point(src: str) -> float:
    """One pair of sweeps, 16 points then 2, run back to back: their difference per point (wall;
    the CPU time of both processes per point is kept in CPU: less moved by a loaded machine)."""
    big = run_once(sweep(16), src)
    small = run_once(sweep(2), src)
    if big.code or small.code:
        raise SystemExit(f"a sweep failed (exit {big.code}, {small.code})")
    CPU.setdefault(src, []).append((big.cpu - small.cpu) / 14)
    return (big.wall - small.wall) / 14


def main() -> None:
    args = parser(__doc__).parse_args()
    header("gpuplay " + " ".join(sweep(16)) + "  (and :2)", f"a point <= {GOAL} × {BUDGET_S} s", args.runs)
    per_point(args.src)  # warm-up
    a, b = [], []
    for _ in range(args.runs):
        if args.vs:
            b.append(per_point(args.vs))
        a.append(per_point(args.src))
    for label, xs, src in (("this", a, args.src), ("other", b, args.vs)):
        if xs:
            xs.sort()
            print(f"{label}: a point costs median {med(xs) * 1e3:.0f} ms = {med(xs) / BUDGET_S:.2f}× its budget "
                  f"(min {xs[0] * 1e3:.0f}, max {xs[-1] * 1e3:.0f} ms); CPU per point (both processes) "
                  f"median {med(CPU[src][1:]) * 1e3:.0f} ms")  # fmt: skip
    if b:
        print(f"per-point ratio this/other: {med(a) / med(b):.2f}")
    x = med(a) / BUDGET_S
    print(f"figure: {x:.2f}× the budget against a goal of {GOAL}×: {'met' if x <= GOAL else 'not met'}")


if __name__ == "__main__":
    main()
