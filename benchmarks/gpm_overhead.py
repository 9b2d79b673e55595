"""GPM's cost per timed step on the CPU path (a benchmark, not a test).

GPM is sampled twice per run (before and after the timed steps, core/hw/nvidia.py), never inside
them. This measures a small CPU step through gpuplay's runner three ways, interleaved A B C A B C:
no telemetry; RunTelemetry on the CPU (what a CPU run gets); and RunTelemetry bracketing the same
steps with GPM samples of a fake Hopper (tests/unit/gpu_fakes.py, as a GPU run would). It prints
each median per step and the differences, which should be within the noise (~0).

    python benchmarks/gpm_overhead.py [--rounds 5] [--steps 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' fake nvidia-ml-py


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()

    from gpuplay.core.measure import telemetry
    from gpuplay.core.runner import run
    from gpuplay.core.spec import RunSpec
    from tests.unit.gpu_fakes import FakeGpu, FakePynvml

    fake = FakePynvml([FakeGpu("GPU-aaaaaaaa-0000-0000-0000-000000000000", "fake H100")])
    fake.busy(0, {fake.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 50.0})
    state = telemetry._NVML()
    state._tried, state._pynvml = True, fake
    telemetry.nvml = state
    telemetry.cuda_device_uuids = lambda: ["aaaaaaaa000000000000000000000000"]

    class WithGpm(telemetry.RunTelemetry):
        def begin(self, device: str) -> Any:
            return super().begin("cuda:0")

    spec = RunSpec.make("elementwise", {"n": 1000}, repeat=args.steps, min_repeat=args.steps,
                        max_repeat=args.steps, warmup=50, threads=1, budget_s=30.0)  # fmt: skip
    ways = {"none": lambda: None, "cpu telemetry": telemetry.RunTelemetry, "GPM bracket": WithGpm}
    medians: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(args.rounds):
        for name, make in ways.items():
            r = run(spec, telemetry=make())
            assert r.status == "ok", r.message
            medians[name].append(statistics.median(r.samples))
            if name == "GPM bracket":
                assert r.telemetry["gpu"]["activity"].get("tensor_active") is not None
    base = statistics.median(medians["none"])
    for name, ms in medians.items():
        m = statistics.median(ms)
        print(f"{name:14s} median per step {m * 1e6:8.3f} µs  ({(m - base) * 1e9:+7.0f} ns vs none; "
              f"rounds {', '.join(f'{x * 1e6:.2f}' for x in ms)})")  # fmt: skip


if __name__ == "__main__":
    main()
