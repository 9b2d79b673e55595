"""onnxruntime as gpuplay's simulated GPU tests see it: tests/gpu_sim/simruntimes.py."""

from tests.gpu_sim.simruntimes import require_sim

require_sim("onnxruntime")

from tests.gpu_sim.simruntimes import (  # noqa: E402
    GraphOptimizationLevel,
    InferenceSession,
    SessionOptions,
    get_available_providers,
    get_device,
)

__version__ = "1.22.0+gpuplay.sim"
__all__ = [
    "GraphOptimizationLevel",
    "InferenceSession",
    "SessionOptions",
    "get_available_providers",
    "get_device",
]
