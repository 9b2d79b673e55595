"""`gpuplay run matmul -p quick --budget 0.2 -b torch --baseline`, whole process.

Goal: at most torch's own import (`python -c "import torch, numpy"`, timed here the same way, in
the same rounds) + the budgets (two configurations × 0.2 s) + 0.3 s.

    python benchmarks/speed_run_torch.py [-n 5] [--vs OTHER/src]
"""

from __future__ import annotations

import subprocess
import sys
import time

from speedbench import describe, header, med, parser, ratios, runs

ARGS = ("run", "matmul", "-p", "quick", "--budget", "0.2", "-b", "torch", "--baseline")
BUDGETS_S = 2 * 0.2
SLACK_S = 0.3


def torch_import_s(n: int) -> float:
    walls = []
    for _ in range(n + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, numpy"], check=True)
        walls.append(time.perf_counter() - t0)
    return med(walls[1:])


def main() -> None:
    args = parser(__doc__).parse_args()
    header("gpuplay " + " ".join(ARGS), "<= import torch + 0.4 s of budgets + 0.3 s", args.runs)
    before = torch_import_s(args.runs)
    a, b = runs(ARGS, args.src, args.runs, args.vs)
    imp = (before + torch_import_s(args.runs)) / 2  # before and after the runs: the load drifts
    print(f"python -c 'import torch, numpy': wall median {imp:.3f} s")
    print(describe(f"this ({args.src})", a))
    if args.vs:
        print(describe(f"other ({args.vs})", b))
        print(ratios(a, b))
    wall, goal = med([r.wall for r in a]), imp + BUDGETS_S + SLACK_S
    print(
        f"figure: {wall:.3f} s against a goal of {goal:.3f} s ({imp:.3f} + {BUDGETS_S} + {SLACK_S}): "
        f"{'met' if wall <= goal else 'not met'}; over the import and budgets: {wall - imp - BUDGETS_S:.3f} s"
    )


if __name__ == "__main__":
    main()
