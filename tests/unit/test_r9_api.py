"""R9 (docs/hardening.md): the Python API's loose ends — its names and file reading in one place
each, and every object `load` hands back shown escaped in a notebook."""

from __future__ import annotations

import pytest

import gpuplay
from gpuplay import api


def test_the_api_names_are_the_packages_less_its_own_two():
    assert sorted(api.__all__) == sorted(set(gpuplay.__all__) - {"__version__", "load_ipython_extension"})


@pytest.mark.parametrize("content", [b"{not json", b"[" * 100_000, b"\xff\xfe"])
def test_load_and_a_sweep_file_say_the_same_words_about_the_same_bad_file(tmp_path, content):
    from gpuplay.core import sweepreport

    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    with pytest.raises(ValueError) as by_load:
        gpuplay.load(bad)
    with pytest.raises(sweepreport.SweepFileError) as by_sweep:
        sweepreport.load_sweep(bad)
    assert str(by_load.value) == str(by_sweep.value) and str(bad) in str(by_load.value)
