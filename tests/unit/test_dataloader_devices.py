"""The data loader's split on an accelerator other than CUDA (XPU, MPS): timed by the device's own
events, as CUDA's is, not by perf_counter around asynchronous launches; and a half-precision batch
crosses to the device as the loader made it, then is converted there (pinned memory stays useful)."""

from __future__ import annotations

import contextlib

import pytest

from gpuplay.core.runner import run
from gpuplay.core.spec import RunSpec
from gpuplay.core.workloads import get_workload
from tests.unit.gpu_fakes import FakeDeviceEvent, install_mps, install_xpu
from tests.unit.hw_helpers import reprobe_torch

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu_fake
TINY = {"batch": 4, "size": 32}
DEVICE_MS = 7.0  # what every pair of the fake device's events reads: a figure no host clock gives


class TimedEvent(FakeDeviceEvent):
    """torch.xpu.Event / torch.mps.Event whose elapsed_time is the device's, here a fixed 7 ms."""

    def elapsed_time(self, end: FakeDeviceEvent) -> float:
        return DEVICE_MS


def _on(monkeypatch, kind: str) -> str:
    """A fake `kind` GPU whose tensors stay on the host (this torch has no such device)."""
    from gpuplay.core.backends import torch_backend

    if kind == "xpu":
        install_xpu(monkeypatch)
    else:
        install_mps(monkeypatch)
    mod = getattr(torch, kind)
    monkeypatch.setattr(mod, "Event", TimedEvent)
    monkeypatch.setattr(mod, "empty_cache", lambda: None)
    if kind == "xpu":
        monkeypatch.setattr(mod, "device", lambda index: contextlib.nullcontext())
    reprobe_torch(monkeypatch)
    real = torch_backend.TorchBackend.from_host
    monkeypatch.setattr(
        torch_backend.TorchBackend, "from_host", lambda self, h, d, t: real(self, h, "cpu", t)
    )
    return "xpu:0" if kind == "xpu" else "mps"


def _spec(device: str, dtype: str = "float32", **params: object) -> RunSpec:
    p = get_workload("dataloader").resolve({**TINY, **params})
    return RunSpec.make("dataloader", p, backend="torch", device=device, dtype=dtype, warmup=1, repeat=4,
                        energy=False, check=False)  # fmt: skip


@pytest.mark.parametrize("kind", ["xpu", "mps"])
def test_the_split_on_xpu_and_mps_is_timed_by_the_devices_events(monkeypatch, kind):
    device = _on(monkeypatch, kind)
    r = run(_spec(device))
    assert r.status == "ok", r.message
    assert r.samples == [pytest.approx(DEVICE_MS / 1e3)] * 4  # the step: the device's events
    # the copy and the model too, not perf_counter around launches that return at once
    assert r.split["h2d_s"] == [pytest.approx(DEVICE_MS / 1e3)] * 4
    assert r.split["model_s"] == [pytest.approx(DEVICE_MS / 1e3)] * 4
    assert len(r.split["data_wait_s"]) == 4  # waiting for the batch is the host's: perf_counter


@pytest.mark.filterwarnings(
    "ignore:'pin_memory' argument is set as true:UserWarning"
)  # this torch has no GPU
def test_a_half_precision_batch_is_moved_first_then_converted_on_the_device(monkeypatch):
    device = _on(monkeypatch, "xpu")
    moves: list[tuple[str, str | None, bool]] = []
    real_to = torch.Tensor.to

    def to(self, *args, **kwargs):
        target = kwargs.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
        moved = "device" in kwargs or any(isinstance(a, str | torch.device) for a in args)
        moves.append((str(self.dtype), str(target) if target is not None else None, moved))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    r = run(_spec(device, "float16", pin="on"))
    assert r.status == "ok", r.message
    crossing = [m for m in moves if m[2] and m[0] == "torch.float32"]
    assert crossing, moves
    # the batch crosses in the loader's float32 (no conversion on the host into pageable memory) …
    assert all(target is None for _, target, _ in crossing), crossing
    # … and is converted to float16 after, on the device
    assert ("torch.float32", "torch.float16", False) in moves
