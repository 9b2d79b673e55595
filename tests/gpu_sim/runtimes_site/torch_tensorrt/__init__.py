"""torch_tensorrt as gpuplay's simulated GPU tests see it: tests/gpu_sim/simruntimes.py."""

from tests.gpu_sim.simruntimes import require_sim

require_sim("torch_tensorrt")

from tests.gpu_sim.simruntimes import trt_compile as compile  # noqa: E402,A001

__version__ = "2.8.0+gpuplay.sim"
__all__ = ["compile"]
