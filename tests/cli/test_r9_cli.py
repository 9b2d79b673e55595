"""R9 (docs/hardening.md): what a new user tripped over on the command line, each pinned through the
command a user types."""

from __future__ import annotations

from click.testing import CliRunner

from gpuplay.cli import main


def test_compare_devices_stopped_by_ctrl_c_exits_130_as_every_command_does(monkeypatch):
    from gpuplay.core import devices_compare

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(devices_compare, "run_devices", interrupted)
    res = CliRunner().invoke(main, ["compare", "matmul", "--backends", "numpy", "--devices", "cpu"])
    assert res.exit_code == 130, res.output  # was 1, an error, against cli/exitcodes.py
    assert "interrupted by SIGINT" in res.stderr
