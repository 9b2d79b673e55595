"""Issue 34, round 6, row 1: what a NumPy `run` paid beside its measurement, on both ends.

The engine's start no longer reads package metadata, core.config or AMD's glue, nor imports
multiprocessing; package versions are read without importlib.metadata (core/storage/installed.py); the front end reads the
roof's library versions while its engine starts, not after the answer; the engine is asked to end
before the table is printed; the `gpuplay` process ends without tearing its interpreter down.
"""

from __future__ import annotations

import ctypes.util
import os
import socket
import subprocess
import sys
import textwrap
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from gpuplay.core.engine.wire import FrameConnection
from gpuplay.core.measure import roofline

ROOT = Path(__file__).resolve().parents[2]


def _python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


# -- the engine's start ----------------------------------------------------------------------
def test_a_numpy_run_in_the_engine_reads_no_metadata_config_or_other_vendor_s_glue():
    out = _python("""
        import sys
        from gpuplay.core.engine.devicelock import measure_exclusively
        from gpuplay.core.engine import server
        server.warm_numpy_probe(); server.warm_runner(); server.prime_first_run()
        from gpuplay.core.runner import run
        from gpuplay.core.spec import RunSpec
        spec = RunSpec.make("matmul", {"n": 64}, budget_s=0.03, warmup=1)
        r = measure_exclusively(spec, lambda: run(spec, telemetry=server._run_telemetry()), None,
                                lambda *a: None)
        print(sorted(m for m in ("importlib.metadata", "gpuplay.core.storage.config", "tomllib", "platformdirs",
                                 "multiprocessing", "gpuplay.core.hw.amd", "gpuplay.core.hw.apple",
                                 "torch") if m in sys.modules))
        from importlib import metadata  # the test's own import, after the run
        v = r.conditions["versions"]
        print(r.status, r.check_ok, v["numpy"] == metadata.version("numpy"),
              v.get("torch") == (metadata.version("torch") if "torch" in {d.metadata["Name"] for d in
                                 metadata.distributions()} else None))
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    modules, figures = out.stdout.splitlines()[-2:]
    assert modules == "[]"
    assert (
        figures == "ok True True True"
    )  # the installed versions, torch's too, read without importlib.metadata


def test_the_cold_probe_finds_malloc_trim_without_running_ldconfig(monkeypatch):
    from gpuplay.core.runner import alloc

    def no_child_process(_name):
        raise AssertionError("ctypes.util.find_library runs `ldconfig -p` in a child process")

    monkeypatch.setattr(ctypes.util, "find_library", no_child_process)
    alloc.page_returner.cache_clear()
    try:
        trim = alloc.page_returner()
        if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION"):
            assert trim is not None and trim() in (0, 1)
    finally:
        alloc.page_returner.cache_clear()


# -- the roof's libraries, read while the engine starts ----------------------------------------
def _calibrated(numpy_version: str, torch_version: str | None) -> None:
    from gpuplay.core.hw.system import cpu_name
    from gpuplay.core.measure.roofline import DevicePeaks, Measurement

    fp = {"name": cpu_name(), "numpy": numpy_version, "torch": torch_version, "cores": roofline.cpu_count()}
    roofline.save_peaks(DevicePeaks("cpu", cpu_name(), fp, "2026-01-01T00:00:00+00:00", 1.0, [
        Measurement("memory", "triad", "numpy", 20.0, "3 x 128 MiB", 0.01, 5),
        Measurement("compute", "float32", "numpy", 200.0, "n=1024", 0.01, 5),
    ]))  # fmt: skip


def _result(versions: object):
    from gpuplay.core.hw.system import cpu_name
    from gpuplay.core.result import RunResult
    from gpuplay.core.spec import RunSpec

    return RunResult(spec=RunSpec.make("matmul", {"n": 256}), status="ok", samples=[1e-3] * 5,
                     flops=2 * 256**3, bytes=3 * 4 * 256**2,
                     conditions={"device_name": cpu_name(), "versions": versions})  # fmt: skip


def test_the_roof_s_library_versions_are_read_before_the_answer_not_after(monkeypatch):
    from gpuplay.cli.output import warm_for_results
    from gpuplay.core.storage import installed

    installed.version.cache_clear()
    try:
        warm_for_results()  # a command, while its engine starts
        from importlib import metadata

        versions = {}
        for lib in roofline.LIBRARIES:
            try:
                versions[lib] = metadata.version(lib)
            except metadata.PackageNotFoundError:
                versions[lib] = None
        _calibrated(versions["numpy"], versions["torch"])

        def read(*_a):
            raise AssertionError("read a package's metadata after the answer")

        monkeypatch.setattr(installed, "_version_field", read)
        monkeypatch.setattr(installed, "_metadata_version", read)
        roofline._cached.cache_clear()
        roof = _result({"numpy": versions["numpy"]}).to_dict()["roof"]
    finally:
        installed.version.cache_clear()
    assert roof["status"] == "ok" and roof["fraction"] > 0, roof


def test_an_older_result_is_placed_against_a_calibration_made_since(monkeypatch):
    """A result from before a NumPy upgrade (history, `load`, `compare --from`) is placed against
    the peaks measured since with the libraries installed now: the peaks describe the device
    (review r1: holding it against the versions it records made "run gpuplay calibrate" loop)."""
    _calibrated("2.0.0", None)  # calibrated after the upgrade
    monkeypatch.setattr(roofline, "package_version", lambda name: {"numpy": "2.0.0"}.get(name))
    roofline._cached.cache_clear()
    roof = _result({"numpy": "1.26.4"}).to_dict()["roof"]  # measured before it
    assert roof["status"] == "ok" and "run gpuplay calibrate" not in roof.get("note", ""), roof


# -- the engine's socket -----------------------------------------------------------------------
@pytest.mark.parametrize("size", [0, 1, 16384, 16385, 3 * 2**20 + 7])
def test_frames_are_multiprocessing_s_own_both_ways(size):
    a, b = socket.socketpair()
    ours, theirs = FrameConnection(os.dup(a.fileno())), Connection(os.dup(b.fileno()))
    a.close()
    b.close()
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    try:
        import threading

        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(theirs.recv_bytes()))
        reader.start()
        ours.send_bytes(payload)
        reader.join(10)
        assert got == [payload]
        writer = threading.Thread(target=theirs.send_bytes, args=(payload[::-1],))
        writer.start()
        assert ours.recv_bytes() == payload[::-1]
        writer.join(10)
    finally:
        ours.close()
        theirs.close()


def test_a_stream_that_ends_says_so_and_a_closed_end_raises():
    a, b = socket.socketpair()
    ours = FrameConnection(os.dup(a.fileno()))
    a.close()
    b.sendall((10).to_bytes(4, "big") + b"abc")  # a frame cut short
    b.close()
    with pytest.raises(EOFError, match="during message"):
        ours.recv_bytes()
    with pytest.raises(EOFError):
        ours.recv_bytes()  # at a frame's start: the plain end of the stream
    ours.close()
    ours.close()  # twice is harmless
    with pytest.raises(OSError, match="closed"):
        ours.send_bytes(b"x")


# -- the front end's end ---------------------------------------------------------------------
def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {
        **os.environ,
        "GPUPLAY_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT / "src"),
        **more,
    }
    env.pop("GPUPLAY_IN_PROCESS", None)
    return env


TEARDOWN_SEEN = """
    import sys
    sys.argv = ["gpuplay", *sys.argv[1:]]  # this process is the `gpuplay` command
    class Torn:
        def __del__(self):
            print("interpreter torn down", flush=True)
    kept = Torn()  # a module global: only the interpreter's teardown finalises it
    {before}
    from gpuplay.cli import main
    main()
"""


def test_the_command_ends_without_tearing_its_interpreter_down(tmp_path):
    out = _python(TEARDOWN_SEEN.format(before=""), "--version", env=_env(tmp_path))
    assert out.returncode == 0 and "gpuplay, version" in out.stdout, out.stderr
    assert "interpreter torn down" not in out.stdout
    # the same program calling `main` as another program would (a test, a notebook): torn down
    control = _python(
        TEARDOWN_SEEN.format(before="sys.argv[0] = 'my-script'"), "--version", env=_env(tmp_path)
    )
    assert control.returncode == 0 and "interpreter torn down" in control.stdout, control.stderr


def test_a_profiled_command_ends_as_the_interpreter_does(tmp_path):
    # cProfile (pyinstrument alike) writes its report after the command returns: not cut short.
    prof = tmp_path / "gpuplay.prof"
    out = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "gpuplay", "--version"],
                         capture_output=True, text=True, timeout=60, env=_env(tmp_path))  # fmt: skip
    assert out.returncode == 0 and "gpuplay, version" in out.stdout, out.stderr
    assert prof.is_file() and prof.stat().st_size > 0


def test_a_run_s_status_output_and_log_survive_the_fast_end(tmp_path):
    env = _env(tmp_path)
    bad = subprocess.run([sys.executable, "-m", "gpuplay", "run", "no-such-scenario"], capture_output=True,
                         text=True, timeout=60, env=env)  # fmt: skip
    assert bad.returncode == 2 and "unknown scenario 'no-such-scenario'" in bad.stderr
    out_file = tmp_path / "r.json"
    ok = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-s", "n=64", "--budget", "0.02",
                         "--format", "json", "--out", str(out_file)], capture_output=True, text=True, timeout=120,
                        env=env)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    import json

    doc = json.loads(out_file.read_text())
    assert doc["results"][0]["status"] == "ok"
    logs = list((tmp_path / "state" / "sessions").glob("session-*.jsonl"))
    assert len(logs) == 1 and logs[0].read_text().count("\n") == 1


def test_the_engine_is_asked_to_end_before_the_table_is_printed(tmp_path):
    out = subprocess.run([sys.executable, "-m", "gpuplay", "run", "matmul", "-s", "n=64", "--budget", "0.02"],
                         capture_output=True, text=True, timeout=120,
                         env=_env(tmp_path, GPUPLAY_TRACE="1"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    front = [line.split("front end")[-1].strip() for line in out.stderr.splitlines()
             if line.startswith("gpuplay trace") and "front end" in line]  # fmt: skip
    assert front.index("engine: released") < front.index("run: printed") < front.index("engine: closing"), (
        front
    )
    assert "heard Shutdown" in out.stderr  # the engine's own mark: it heard the request


def test_a_numpy_run_s_front_end_imports_no_psutil_multiprocessing_or_live_display(tmp_path):
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpuplay", "run", "matmul", "-s", "n=64",
                          "--budget", "0.02"], capture_output=True, text=True, timeout=120,
                         env=_env(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }
    assert "numpy" not in imported  # the front end's own imports only (the engine's are not on this stderr)
    assert not imported & {"psutil", "multiprocessing", "rich.live", "rich.status", "gpuplay.core.hw.amd"}


# -- the check, in blocks ----------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0,), (5,), (1 << 16,), ((1 << 16) + 1,), (3, (1 << 16) + 5), (7, 9, 11)])
@pytest.mark.parametrize("kind", ["float32 of float64", "complex64 of complex128"])
def test_the_blocked_check_is_the_whole_array_norm(shape, kind):
    import numpy as np

    from gpuplay.core.workloads import relative_error

    rng = np.random.default_rng(7)
    ref = rng.standard_normal(shape)
    if kind.startswith("complex"):
        ref = ref + 1j * rng.standard_normal(shape)
    out = (ref * (1 + 1e-6 * rng.standard_normal(shape))).astype(
        np.complex64 if ref.dtype.kind == "c" else np.float32
    )
    whole = (
        np.linalg.norm((out.astype(ref.dtype) - ref).ravel()) / np.linalg.norm(ref.ravel())
        if ref.size
        else 0.0
    )
    assert relative_error(out, ref) == pytest.approx(whole, rel=1e-12, abs=0.0)
    if ref.size:
        bad = out.copy().reshape(-1)
        bad[-1] = np.nan  # in the last block
        assert relative_error(bad.reshape(shape), ref) == float("inf")
    assert relative_error(np.zeros(shape), np.zeros(shape)) == 0.0


def test_an_engine_with_no_child_ends_without_searching_for_descendants():
    out = _python("""
        import os, subprocess, sys
        from gpuplay.core.process import lifeline
        lifeline.kill_descendants(os.getpid())  # no child: nothing to search for
        print("psutil" in sys.modules)
        child = subprocess.Popen(["sleep", "30"])
        lifeline.kill_descendants(os.getpid())  # a child: found and killed
        print(child.wait(10), "psutil" in sys.modules)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "-9", "True"]


def test_an_engine_never_asked_to_run_is_closed_without_searching_for_descendants():
    # A refused run's early engine ran no code of anyone's: killing its group is enough.
    out = _python("""
        import sys
        from gpuplay.core.engine.client import EngineClient
        c = EngineClient(backends=("numpy",))
        c.start()
        assert c.wait_probe(60) is not None
        proc = c._proc
        c.close(wait=False)
        print("psutil" in sys.modules, proc.returncode is not None)
    """)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True"]
