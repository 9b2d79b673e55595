"""pynvml (nvidia-ml-py) over the simulated device: the recorded-device fake of tests/unit/gpu_fakes.py
with its readings taken from tests/gpu_sim/device.py. UUID and name say the board is simulated;
utilisation, power, the energy counter, memory and GPM counters follow the work the device ran.
Installed as `pynvml` in sys.modules, so gpuplay's `import pynvml` finds it as it would the real one.
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

from tests.gpu_sim.device import CONTEXT_BYTES, POWER_LIMIT_W, device, ledger
from tests.unit.gpu_fakes import FakeGpmSample, FakeGpu, FakePynvml

# GPM metric id (nvml.h's nvmlGpmMetricId_t) -> (the device's unit, scale)
GPM_UNITS = {
    FakePynvml.NVML_GPM_METRIC_SM_UTIL: ("sm", 1.0),
    FakePynvml.NVML_GPM_METRIC_SM_OCCUPANCY: ("sm", 0.5),
    FakePynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: ("tensor", 1.0),
    FakePynvml.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: ("tensor", 1.0),
    FakePynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: ("dram", 1.0),
}


# Seconds the host is held up inside each nvmlGpmSampleGet after the sample is taken (a loaded machine).
HOLDUP_ENV = "GPUPLAY_TEST_SIM_GPM_HOLDUP_S"
DRIVER_VERSION = "580.82.07"  # the R580 driver that nvidia-ml-py 13.580.82 was released with
CUDA_DRIVER_VERSION = 13000  # the CUDA version an R580 driver supports: 13.0


class SimPynvml(FakePynvml):
    """The pynvml module of a machine with the simulated board as its only GPU."""

    def __init__(self) -> None:
        sim = device()
        prof = sim.profile
        gpu = FakeGpu(prof.uuid, prof.name, power_limit_mw=int(POWER_LIMIT_W * 1000), arch=prof.arch)
        super().__init__([gpu])
        self.__name__ = "pynvml"
        self.__version__ = "13.580.82"
        self.sim = sim

    def now(self) -> float:
        return time.monotonic()  # the device's clock is the host's (tests/gpu_sim/device.py)

    def _fill(self, s: FakeGpmSample, key: tuple[int, int | None]) -> FakeGpmSample:
        totals = self.sim.totals()["gpm_percent_s"]
        s.key, s.t = key, self.now()
        s.counts = {mid: totals.get(unit, 0.0) * scale for mid, (unit, scale) in GPM_UNITS.items()}
        ledger("gpm_sample", t_sample=s.t, counts=totals, busy_s=self.sim.totals()["busy_s"],
               flushes=self.sim.flushes)  # fmt: skip
        held = float(os.environ.get(HOLDUP_ENV) or 0.0)
        if held > 0:  # a loaded host: descheduled after the driver took the sample, before it returns
            time.sleep(held)
        return s

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:  # noqa: N802
        self._log("nvmlDeviceGetUtilizationRates")
        util = self.sim.util_percent()
        ledger("nvml_util", gpu=util)
        return SimpleNamespace(gpu=util, memory=min(100, util // 2))

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:  # noqa: N802
        mw = int(self.sim.power_w() * 1000)
        ledger("nvml_power", mw=mw)
        return mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:  # noqa: N802
        mj = self.sim.energy_now_mj()
        ledger("nvml_energy", mj=mj)
        return mj

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:  # noqa: N802
        total = self.sim.profile.total_memory
        used = CONTEXT_BYTES + self.sim.allocated
        return SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:  # noqa: N802
        return 40 + int(self.sim.power_w() / 20)

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:  # noqa: N802
        return 1980 if kind == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:  # noqa: N802
        return 0

    # nvidia-ml-py: the driver's version as a str (bytes before 11.515), and the CUDA version the
    # driver supports as nvml.h's int (major·1000 + minor·10; CUDA_VERSION_MAJOR/MINOR undo it).
    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return DRIVER_VERSION

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return CUDA_DRIVER_VERSION

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:  # noqa: N802
        return CUDA_DRIVER_VERSION


def install() -> SimPynvml:
    import sys

    module = SimPynvml()
    sys.modules["pynvml"] = module  # type: ignore[assignment]
    return module
