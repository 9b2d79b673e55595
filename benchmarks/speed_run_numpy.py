"""A NumPy-only `gpuplay run matmul -p quick --budget 0.2`, whole process.

Goal: at most 0.6 s wall, and no torch imported in the front end or in the engine (the peak
memory says which: ~90 MiB without torch, ~270 MiB with it on the development machine).

    python benchmarks/speed_run_numpy.py [-n 5] [--vs OTHER/src]
"""

from __future__ import annotations

from speedbench import describe, header, med, parser, ratios, runs

ARGS = ("run", "matmul", "-p", "quick", "--budget", "0.2")
GOAL_S = 0.6


def main() -> None:
    args = parser(__doc__).parse_args()
    header("gpuplay " + " ".join(ARGS), f"<= {GOAL_S} s wall; no torch in either process", args.runs)
    a, b = runs(ARGS, args.src, args.runs, args.vs)
    print(describe(f"this ({args.src})", a))
    if args.vs:
        print(describe(f"other ({args.vs})", b))
        print(ratios(a, b))
    wall = med([r.wall for r in a])
    print(f"figure: {wall:.3f} s against a goal of {GOAL_S} s: {'met' if wall <= GOAL_S else 'not met'}")


if __name__ == "__main__":
    main()
