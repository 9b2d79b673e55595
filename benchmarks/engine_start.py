"""The engine's start for a NumPy run, alone: an interpreter doing what the engine does before it
can measure (a NumPy run's critical path).

`python -c` runs the engine's own steps in order — its server's imports, NumPy and its probe, the
runner, the first run's priming (`engine/server.py`: `warm_numpy_probe`, `warm_runner`,
`prime_first_run`) and the matmul workload — then exits with `os._exit`, so what is timed is the
start, not a teardown. Each figure is the median of N such processes after one warm-up, wall and
CPU (user + system, the kernel's accounting); with `--vs SRC` another source tree runs alternately
and each pair's ratio and difference is printed. The floor beside it is an interpreter importing
NumPy and numpy.random only: what no engine can go under.

    python benchmarks/engine_start.py [-n 21] [--src SRC] [--vs OTHER/src]
"""

from __future__ import annotations

import sys
import tempfile

from speedbench import Run, env_for, med, parser, run_python

ENGINE = """
import os
from gpuplay.core.engine import server
server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()
import gpuplay.core.workloads.linalg
os._exit(0)
"""
FLOOR = "import os, numpy, numpy.random; os._exit(0)"


def start(code: str, src: str) -> Run:
    with tempfile.TemporaryDirectory(prefix="gpuplay-engine-start-") as tmp:
        return run_python(["-c", code], env=env_for(src, tmp), what=f"an engine start ({src})")


def line(label: str, rs: list[Run]) -> str:
    return (f"{label}: wall median {med([r.wall for r in rs]) * 1e3:.1f} ms (min {min(r.wall for r in rs) * 1e3:.1f}), "
            f"CPU median {med([r.cpu for r in rs]) * 1e3:.1f} ms")  # fmt: skip


def main() -> None:
    args = parser(__doc__).parse_args()
    if args.runs < 1:
        sys.exit("engine_start.py: -n must be at least 1")
    print("# a NumPy run's engine start: server, NumPy and its probe, the runner, the first run's priming")
    from speedbench import machine

    print(f"# machine: {machine()}")
    print(f"# median of {args.runs} processes after one warm-up each, alternating")
    trees = [args.src, *([args.vs] if args.vs else [])]
    for src in trees:
        start(ENGINE, src)
    start(FLOOR, args.src)
    got: dict[str, list[Run]] = {src: [] for src in trees}
    floor: list[Run] = []
    for _ in range(args.runs):
        for src in trees:
            got[src].append(start(ENGINE, src))
        floor.append(start(FLOOR, args.src))
    print(line("floor (NumPy and numpy.random alone)", floor))
    for label, src in zip(("this", "other"), trees, strict=False):
        print(line(f"{label} ({src})", got[src]))
    if args.vs:
        a, b = got[args.src], got[args.vs]
        walls = [x.wall / y.wall for x, y in zip(a, b, strict=True)]
        cpus = [x.cpu / y.cpu for x, y in zip(a, b, strict=True)]
        print(f"pair ratio this/other: wall median {med(walls):.3f}, CPU median {med(cpus):.3f}; "
              f"difference median {med([(x.wall - y.wall) * 1e3 for x, y in zip(a, b, strict=True)]):+.1f} ms wall")  # fmt: skip
    print(
        f"this over the floor: {(med([r.wall for r in got[args.src]]) - med([r.wall for r in floor])) * 1e3:.1f} ms wall"
    )


if __name__ == "__main__":
    main()
