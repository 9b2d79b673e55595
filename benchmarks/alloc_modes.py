"""Warm against cold host allocation, each in a fresh process (a benchmark, not a test).

Runs `gpuplay run` with --alloc warm and --alloc cold for a few CPU configurations whose steps
allocate large outputs, and prints each median, its page faults per step and, for the warm run,
the cold probe's ratio and the note gpuplay printed. The cold mode returns freed pages to the OS
between steps (malloc_trim), as a fresh script can run; the warm mode reuses them, as gpuplay's
long-lived engine usually does after warm-up.

    python benchmarks/alloc_modes.py [--budget 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CONFIGS = [
    ("heat", ["n=512"], "torch"),
    ("elementwise", ["n=4000000"], "torch"),
    ("elementwise", ["n=4000000"], "numpy"),
]


def measure(scenario: str, sizes: list[str], backend: str, alloc: str, budget: float, threads: int) -> dict:
    cmd = [sys.executable, "-m", "gpuplay", "run", scenario, "-b", backend, "--alloc", alloc,
           "--budget", str(budget), "--threads", str(threads), "--format", "json"]  # fmt: skip
    for s in sizes:
        cmd += ["-s", s]
    env = dict(os.environ, GPUPLAY_IN_PROCESS="1")  # a fresh process per measurement
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    return json.loads(out)["results"][0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    print("configuration                     mode   median     faults/step  cold probe  note")
    for scenario, sizes, backend in CONFIGS:
        for alloc in ("warm", "cold"):
            r = measure(scenario, sizes, backend, alloc, args.budget, args.threads)
            c = r["conditions"]
            probe = c.get("alloc_cold_probe") or {}
            ratio = f"{probe['ratio']:.2f}×" if probe.get("ratio") else "—"
            note = next((n for n in r["notes"] if "alloc" in n), "")
            label = f"{scenario} {' '.join(sizes)} {backend}"
            print(f"{label:33s} {alloc:5s}  {r['summary']['median'] * 1e3:7.2f} ms  "
                  f"{c.get('page_faults_per_step', 0):11,.0f}  {ratio:>10s}  {note[:90]}")  # fmt: skip


if __name__ == "__main__":
    main()
