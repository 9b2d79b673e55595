"""What a sweep costs beyond its points' budgets (a benchmark, not a test).

Runs the real `gpuplay sweep … --progress-json` as a child process, as a user (or the Sweep tab)
does, and times from the outside: the command's start-up (imports, the engine's start and
probe) up to its plan line, then the sweep itself from the plan line to the last point, against
the sum of the points' budgets (points × --budget). What is left per point is the sweep's overhead:
the step-time estimate, input set-up, warm-up, the float64 check, the engine round trip. Tiny
steps stop at the runner's max_repeat (100,000) before their budget, so "untimed/point" also
gives the loop less what the session log says each point spent in timed steps, warm-up and set-up.

    python benchmarks/sweep_overhead.py [--over n=32..512] [--budgets 0.1,0.5] [--backends numpy,torch]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_sweep(over: str, backends: str, budget: float, threads: int | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="gpuplay-bench-") as tmp:
        env = {**os.environ, "GPUPLAY_STATE_DIR": f"{tmp}/state", "PYTHONPATH": str(ROOT / "src")}
        env.pop("GPUPLAY_IN_PROCESS", None)  # the engine process, as users run it
        cmd = [sys.executable, "-m", "gpuplay", "sweep", "matmul", "--over", over, "--backends", backends,
               "--budget", str(budget), "--format", "json", "--out", f"{tmp}/s.json", "--progress-json"]  # fmt: skip
        if threads:
            cmd += ["--threads", str(threads)]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        plan_at, last_at, points = None, None, 0
        assert proc.stderr is not None
        for line in proc.stderr:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if "plan" in event:
                plan_at = time.perf_counter()
            elif "point" in event:
                last_at, points = time.perf_counter(), points + 1
        proc.wait()
        end = time.perf_counter()
        if proc.returncode != 0 or plan_at is None or last_at is None:
            raise SystemExit(f"sweep failed (exit {proc.returncode})")
        # The session log holds every point's samples: the timed steps and warm-up as they ran
        # (read_log reads every log format: format 2 packs them).
        sys.path.insert(0, str(ROOT / "src"))  # this checkout's reader, as the child ran its writer
        from gpuplay.core.reports.sessionlog import read_log

        logged = [d for f in Path(f"{tmp}/state").rglob("*.jsonl") for d in read_log(f)]
    timed = sum(sum(r.get("samples_s") or []) for r in logged)
    warm = sum(sum(r.get("warmup_s") or []) for r in logged)
    setup = sum(r.get("setup_s") or 0.0 for r in logged)
    loop = last_at - plan_at
    return {
        "points": points,
        "budget": budget,
        "wall": end - t0,
        "startup": plan_at - t0,
        "loop": loop,
        "budgets": points * budget,
        "timed": timed,
        "warm": warm + setup,
        "overhead_per_point": (loop - points * budget) / points,
        "untimed_per_point": (loop - timed - warm - setup) / points,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--over", default="n=32..512")
    ap.add_argument("--backends", default="numpy,torch")
    ap.add_argument("--budgets", default="0.1,0.5")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"gpuplay sweep matmul --over {args.over} --backends {args.backends} --threads {args.threads}")
    print(f"{os.cpu_count()} CPUs; the loop is timed from the plan line to the last point line\n")
    head = ("budget", "points", "wall s", "start-up s", "loop s", "Σ budgets s", "Σ timed s", "Σ warm+setup s",
            "loop/Σbudgets",
            "overhead/point", "other/point")  # fmt: skip
    print("  ".join(f"{h:>14}" for h in head))
    for budget in (float(b) for b in args.budgets.split(",")):
        for _ in range(args.rounds):
            r = one_sweep(args.over, args.backends, budget, args.threads)
            row = (f"{budget:g}", f"{r['points']}", f"{r['wall']:.2f}", f"{r['startup']:.2f}", f"{r['loop']:.2f}",
                   f"{r['budgets']:.2f}", f"{r['timed']:.2f}", f"{r['warm']:.2f}", f"{r['loop'] / r['budgets']:.2f}×",
                   f"{1e3 * r['overhead_per_point']:.0f} ms", f"{1e3 * r['untimed_per_point']:.0f} ms")  # fmt: skip
            print("  ".join(f"{c:>14}" for c in row), flush=True)


if __name__ == "__main__":
    main()
