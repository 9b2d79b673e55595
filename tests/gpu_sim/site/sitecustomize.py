"""Installs gpuplay's simulated GPU at interpreter start, in a process whose environment asks for
it (GPUPLAY_TEST_SIM=h100 and this folder first on PYTHONPATH): see tests/gpu_sim/__init__.py.
Only tests set that environment; nothing in gpuplay's own code does."""

import os
import sys

if os.environ.get("GPUPLAY_TEST_SIM"):
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if _root not in sys.path:
        sys.path.insert(0, _root)
    from tests.gpu_sim.install import install

    install(os.environ["GPUPLAY_TEST_SIM"])
