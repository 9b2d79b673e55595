"""R9 (docs/hardening.md): gpuplay.compare takes params= as gpuplay.run does, and a scenario folder
the caller named must exist, as on the command line."""

from __future__ import annotations

import pytest

import gpuplay


@pytest.fixture(autouse=True)
def _in_process(monkeypatch):
    monkeypatch.setenv("GPUPLAY_IN_PROCESS", "1")


def test_compare_takes_params_as_run_does():
    """gpuplay.compare had no params=: a notebook could not compare matmul at another n."""
    res = gpuplay.compare("matmul", backends="numpy", params={"n": 48}, budget_s=0.02, progress=False)
    assert [r.size for r in res] == ["48×48"]
    assert res[0].run_result.spec.params["n"] == 48


@pytest.mark.parametrize("call", [gpuplay.run, gpuplay.compare])
def test_an_unknown_parameter_is_a_value_error_naming_the_known_ones_in_run_and_compare(call):
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) nn for matmul \(known: n\)"):
        call("matmul", params={"nn": 8})


def test_compare_params_of_the_wrong_kind_are_refused():
    with pytest.raises(TypeError, match="params takes a dict of parameter names to values"):
        gpuplay.compare("matmul", backends="numpy", params=[("n", 8)], progress=False)


@pytest.mark.parametrize("call", [gpuplay.run, gpuplay.compare, gpuplay.sweep])
def test_a_scenario_folder_that_is_not_there_is_a_value_error(call, tmp_path):
    args = {"over": {"n": [8, 16]}} if call is gpuplay.sweep else {}
    with pytest.raises(ValueError, match=r"scenario_dirs: .*missing does not exist"):
        call("matmul", **args, scenario_dirs=[tmp_path / "missing"])
