"""Warm against cold cache for small memory-bound steps: what `--cache cold` changes.

A memory copy (transfers op=copy) at sizes that fit in the last-level cache, at one that
does not, timed warm (back to back) and cold (a buffer larger than the LLC written between
steps, outside the timing), alternating warm and cold runs so that load drift hits both.

    python benchmarks/cold_cache.py [--backend numpy|torch] [--device cpu|cuda:N] [--rounds 3]

Prints the median step time of each and the cold/warm ratio. Expect a ratio near 1 for the
size beyond the cache and above 1 for the cache-resident ones.
"""

from __future__ import annotations

import argparse
import statistics

from gpuplay.core.backends.cache_flush import last_level_cache
from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="numpy")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    llc = last_level_cache()
    print(f"last-level cache: {f'L{llc[0]} {llc[1] / 2**20:.0f} MiB' if llc else 'unknown'}")
    sizes = [1 << 16, 1 << 18, 1 << 20, 1 << 24]  # float32 elements; the copy reads and writes
    print(f"{'elements':>10} {'MiB r+w':>8} {'warm µs':>10} {'cold µs':>10} {'cold/warm':>9}")
    for n in sizes:
        base = RunSpec.make(
            "transfers", {"n": n, "op": "copy"}, backend=args.backend, device=args.device,
            repeat=args.repeat, warmup=5,
        )  # fmt: skip
        warm, cold = [], []
        for _ in range(args.rounds):
            w, c = run(base), run(base.replace(cache="cold"))
            assert w.status == c.status == "ok", (w.message, c.message)
            warm.append(w.median)
            cold.append(c.median)
        mw, mc = statistics.median(warm), statistics.median(cold)
        print(f"{n:>10,} {2 * 4 * n / 2**20:>8.1f} {mw * 1e6:>10.1f} {mc * 1e6:>10.1f} {mc / mw:>9.2f}")


if __name__ == "__main__":
    main()
