"""Shared by the ROCm, XPU and MPS tests: the torch backend as the planner sees it, re-probed."""

from __future__ import annotations

from typing import Any


def reprobe_torch(monkeypatch: Any) -> Any:
    """The torch backend the planner asks, with a probe taken now (under the test's fakes)."""
    from gpuplay.core.backends import get_backend
    from gpuplay.core.backends.torch_backend import TorchBackend

    backend = get_backend("torch")
    monkeypatch.setattr(backend, "_probe_result", TorchBackend().probe(30))
    return backend
