"""Counts read as English: "1 operator call", "2 operator calls"."""

from gpuplay.core.reports.words import counted, singular


def test_one_is_singular_and_the_rest_plural():
    phrase = "operator calls (a compiled graph's generated code counts as one)"
    assert counted(1, phrase) == "1 operator call (a compiled graph's generated code counts as one)"
    assert counted(2.5, phrase).startswith("2.5 operator calls")
    assert counted(0, "CUDA kernels launched") == "0 CUDA kernels launched"
    assert counted(1.0, "CUDA kernels launched") == "1 CUDA kernel launched"
    assert counted(None, "kernels") == "— kernels" and counted(float("nan"), "kernels") == "— kernels"
    assert singular("not itemised: run under Nsight Systems") == "not itemised: run under Nsight Systems"
