"""`--out PATH` on every command that writes a file: a path under a file, an empty path and an
unwritable folder are refused before anything is measured; a write that fails after measuring
prints the results instead."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from gpuplay.cli import main


def test_an_output_path_under_a_file_says_so_not_file_exists(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    out = tmp_path / "results.json" / "run" / "r.json"
    res = CliRunner().invoke(main, ["run", "matmul", "-s", "n=16", "--repeat", "2", "--warmup", "0", "--out",
                                    str(out)])  # fmt: skip
    assert res.exit_code == 2, res.output  # before measuring now (tests/cli/test_r9_testdrive.py)
    said = " ".join(res.output.split())
    assert f"cannot write {out}: {tmp_path / 'results.json'} is a file, not a folder" in said, said
    assert "File exists" not in said and "Not a directory" not in said


@pytest.mark.parametrize(
    "command",
    [["run", "matmul"], ["sweep", "matmul", "--over", "n=8,16"], ["compare", "--scenario", "matmul"],
     ["demo", "numpy-to-gpu", "--rehearse"]],
)  # fmt: skip
def test_an_empty_out_path_is_refused_before_anything_runs(monkeypatch, command):
    """`--out "$UNSET"` printed to stdout and exited 0, as if no --out had been given."""
    from gpuplay.core import engine

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    monkeypatch.setattr(engine, "measure", measured)
    res = CliRunner().invoke(main, [*command, "--out", ""])
    assert res.exit_code == 2, res.output
    assert "Invalid value for '--out': an empty path" in res.output


OUT_COMMANDS = [
    ["run", "matmul", "-b", "numpy"],
    ["sweep", "matmul", "--over", "n=8,16", "--backends", "numpy"],
    ["compare", "--scenario", "matmul", "--backends", "numpy"],
    ["demo", "intro", "--rehearse"],
    ["collectives", "--backend", "gloo"],
]


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("where", ["under_a_file", "proc"])
def test_an_unwritable_out_is_refused_before_anything_is_measured(monkeypatch, tmp_path, command, where):
    """`--out` that could not be written was found after measuring: a "creating folder" note, then
    the error, and the measurement lost. Now exit 2 at once, naming why, nothing measured."""
    from gpuplay.core import engine
    from gpuplay.core.reports import devices_compare
    from gpuplay.core.studies import compare

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    for module, name in ((engine, "measure"), (compare, "run_compare"), (devices_compare, "run_devices")):
        monkeypatch.setattr(module, name, measured)
    (tmp_path / "results.json").write_text("{}")
    out = (
        tmp_path / "results.json" / "run" / "r.json"
        if where == "under_a_file"
        else "/proc/gpuplay-out/r.json"
    )
    res = CliRunner().invoke(main, [*command, "--out", str(out)])
    assert res.exit_code == 2, res.output
    said = " ".join(res.output.split())
    assert f"Invalid value for '--out': cannot write {out}: " in said, said
    why = (
        f"{tmp_path / 'results.json'} is a file, not a folder"
        if where == "under_a_file"
        else "no file can be made in /proc"
    )
    assert why in said and "creating folder" not in said
    assert not list(tmp_path.glob("**/.gpuplay-write-check-*"))  # the check's file is removed


def test_a_write_that_fails_after_measuring_prints_the_results_instead(monkeypatch, tmp_path):
    """A full disk (or the folder removed meanwhile) after the check: the results go to stdout and
    the error says where writing failed; they were lost."""
    import errno

    from gpuplay.core.storage import atomicfile

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomicfile, "write_atomic", full)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["run", "matmul", "-b", "numpy", "-s", "n=16", "--repeat", "2", "--warmup", "0",
                                    "--format", "json", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1, res.output
    assert '"workload": "matmul"' in res.stdout  # the measurement, on stdout
    said = " ".join(res.stderr.split())
    assert (
        f"cannot write {out}: No space left on device; what was measured is printed to stdout instead" in said
    )


def _special(tmp_path, kind):
    """A device (a copy of /dev/null's, made in tmp_path: never /dev/null itself), a FIFO, or a
    symbolic link to a file, at tmp_path/out.json."""
    import os
    import stat

    path = tmp_path / "out.json"
    if kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
        return path, "is a device, not a file"
    if kind == "fifo":
        os.mkfifo(path)
        return path, "is a pipe (FIFO), not a file"
    (tmp_path / "real.json").write_text("kept")
    path.symlink_to(tmp_path / "real.json")
    return path, f"is a symbolic link (to {tmp_path / 'real.json'}); name the file itself"


@pytest.mark.parametrize("command", OUT_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("kind", ["device", "fifo", "symlink"])
def test_an_out_that_is_not_a_regular_file_is_refused_and_left_as_it_was(
    monkeypatch, tmp_path, command, kind
):
    """Results are written to a temporary file renamed over --out: `--out /dev/null` run as root
    replaced /dev/null with a plain file, a FIFO became a file, a link was replaced by one."""
    import os

    from gpuplay.core import engine
    from gpuplay.core.reports import devices_compare
    from gpuplay.core.studies import compare

    def measured(*args, **kwargs):
        raise AssertionError("nothing may be measured")

    for module, name in ((engine, "measure"), (compare, "run_compare"), (devices_compare, "run_devices")):
        monkeypatch.setattr(module, name, measured)
    path, why = _special(tmp_path, kind)
    before = os.lstat(path)
    res = CliRunner().invoke(main, [*command, "--out", str(path)])
    assert res.exit_code == 2, res.output
    assert why in " ".join(res.output.split()), res.output
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)  # the same thing, untouched
