"""The built wheel carries the scenarios, and the installed package finds them."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_ships_scenarios_and_finds_them(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("gpuplay-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpuplay/scenarios/fft2d.toml" in names and "gpuplay/tui/app.tcss" in names
    assert "gpuplay/scenarios/decks/numpy-to-gpu.toml" in names and "gpuplay/tui/presenter.tcss" in names
    assert {f"gpuplay/cli/web/{f}" for f in ("index.html", "gpuplay.js", "gpuplay.css")} <= set(names)
    assert {"gpuplay/py.typed", "gpuplay/__init__.pyi", "gpuplay/api.py"} <= set(
        names
    )  # the typed Python API
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    probe = (
        "from gpuplay.core.catalogue.scenarios import builtin_dir, load_scenarios; s = load_scenarios(); "
        "print(builtin_dir()); print(len(s.scenarios), len(s.errors)); "
        "from gpuplay.core.reports.decks import load_deck, resolve_deck_path; "
        "print(len(load_deck(resolve_deck_path('the-7633x-question'), s).steps))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(unpacked), "PATH": ""},
        cwd=tmp_path,
    ).stdout.split("\n")
    assert out[0].startswith(str(unpacked))  # the wheel's copy, not the checkout's
    shipped = len(list((ROOT / "scenarios").glob("*.toml")))
    assert out[1] == f"{shipped} 0"  # the decks beside the scenarios are not taken for scenarios
    assert out[2] == "5"  # a shipped deck, found by name in the installed package
