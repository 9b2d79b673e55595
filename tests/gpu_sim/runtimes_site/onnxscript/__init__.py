"""A stand-in of gpuplay's tests: present so that gpuplay's ONNX path is offered (the simulated
torch.onnx.export needs neither onnx nor onnxscript). See tests/gpu_sim/simruntimes.py."""

from tests.gpu_sim.simruntimes import require_sim

require_sim("onnxscript")
__version__ = "0.0.0+gpuplay.sim"
