"""The Python API's `devices=` takes every device a RunSpec takes (compare and measure alike)."""

from __future__ import annotations

import pytest

import gpuplay
from gpuplay import api
from tests.unit.gpu_fakes import install_xpu
from tests.unit.hw_helpers import reprobe_torch


def _captured(monkeypatch) -> list:
    seen: list = []
    monkeypatch.setattr(api, "_run_specs", lambda specs, *a: (seen.extend(specs), ([], False))[1])
    monkeypatch.setattr(api, "_adopt_probe", lambda *a, **k: None)  # the fake xpu lives in this process
    return seen


@pytest.mark.gpu_fake
@pytest.mark.parametrize("name", ["xpu:0", "xpu"])
def test_compare_and_measure_select_an_intel_gpu(monkeypatch, name):
    install_xpu(monkeypatch)
    reprobe_torch(monkeypatch)
    seen = _captured(monkeypatch)
    gpuplay.compare("matmul", backends="numpy,torch", devices=[name], progress=False)
    assert {s.device for s in seen if s.backend == "torch"} == {"xpu:0"}
    seen.clear()

    def step(xp, a):
        return a * 2

    def inputs(rng):
        return (rng.standard_normal(8),)

    gpuplay.measure(step, inputs, backends="numpy,torch", devices=name, progress=False)
    assert {s.device for s in seen if s.backend == "torch"} == {"xpu:0"}


def test_a_device_name_no_spec_takes_is_refused_naming_the_forms():
    with pytest.raises(ValueError, match="cpu, cuda, cuda:N, xpu, xpu:N or mps; got 'xpu:a'"):
        gpuplay.compare("matmul", backends="numpy,torch", devices="xpu:a", progress=False)
