from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

# The simulated GPU's fixtures (tests/gpu_sim, docs/testing-gpu-sim.md), for any test to use.
from tests.gpu_sim.fixtures import sim_h100, sim_h100_runtimes  # noqa: F401

# Bytecode is cached, whatever the shell says. With PYTHONDONTWRITEBYTECODE=1 (CI's machine sets
# it) every process compiled gpuplay's modules again: a fresh clone has no __pycache__, and the
# suite starts hundreds of gpuplay processes (a NumPy `gpuplay run` took 0.71 s of CPU without
# gpuplay's bytecode against 0.56 s with it) and each worker rewrote every test module's asserts
# anew (~6 s of its start). __pycache__ is git-ignored; the installed libraries' bytecode was
# written by pip at install time either way.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# Keep torch's OpenMP pool small on the 2-core CI machine; tests measure behaviour, not speed.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Tests that stand for a notebook's stop button send this process SIGINT and expect
# KeyboardInterrupt. A process started in the background by a non-interactive shell (`pytest &`,
# and so each pytest-xdist worker) inherits SIGINT ignored, and Python then installs no handler:
# the signal is lost and such a test waits for its measurement to end by itself.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def backends_probe_here():
    """A command run in this process (CliRunner, the Python API) hands its backends' questions to
    the engine process and marks those it did not ask about as the engine's, pending: right for that
    command's process, wrong for the next test, which measures in this process and would read
    "PyTorch is still being probed" forever. Each test ends with backends that probe here again.
    Set up before `isolated_dirs` (and its monkeypatch), so this runs after a test's patches of the
    backend registry are undone."""
    yield
    from gpuplay.core.engine.protocol import forget_engine_probe

    forget_engine_probe()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    """Session logs and config go to a temporary folder, never the user's."""
    monkeypatch.setenv("GPUPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("GPUPLAY_CONFIG_DIR", str(tmp_path / "config"))
    # torch.compile's on-disk caches (inductor's FX graph and autotuning caches) outlive a run:
    # a machine that compiled the same graph before (an earlier CI run, a developer) would read a
    # 40 ms cache hit where a test times a compile. Each test gets its own, empty.
    # Beside tmp_path, not in it: tests that list what a command left in their folder see none of it.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-inductor"))
    yield


@pytest.fixture(autouse=True)
def plain_children(request, monkeypatch):
    """A test marked `plain_children` asserts what a child process does in a plain interpreter (what
    it imports, how it ends, how fast it stops or times out): under `--cov` its children start
    without coverage (coverage's subprocess patch reads COVERAGE_PROCESS_CONFIG; docs/testing.md)."""
    if request.node.get_closest_marker("plain_children"):
        monkeypatch.delenv("COVERAGE_PROCESS_CONFIG", raising=False)


def gpu_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "compile" in item.keywords:
            item.add_marker(pytest.mark.slow)  # a cold torch.compile alone takes ~16 s on 2 cores
    _long_tests_first_on_each_worker(config, items)
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _long_tests_first_on_each_worker(config, items: list[pytest.Item]) -> None:
    """Tests marked `long` (15 s or more) start first, at the heads of the workers' first shares
    of the collection, the longest first to the share with the least.

    pytest-xdist's worksteal hands each of its k workers a contiguous share of the collection
    (the i-th of the n tests left divided by the k - i workers left) and lets an idle worker steal
    the back half of the longest queue. In the files' order the 70 s soak fell into the last
    share and started at 322 s of a 393 s run, its last 40 s with the other workers done. At the
    heads of the shares each long test starts at once, and the short tests fill in around it."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))
    if workers < 2:  # (a worker's own `dist` option reads "no"; the suite's is worksteal, pyproject)
        return
    long = [item for item in items if item.get_closest_marker("long")]
    if not long:
        return
    rest = [item for item in items if not item.get_closest_marker("long")]
    # Longest first, each to the share with the least so far (the marker's argument: the seconds
    # the test took on CI's two cores in the whole suite).
    long.sort(key=lambda item: -_long_seconds(item))
    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for item in long:
        i = loads.index(min(loads))
        heads[i].append(item)
        loads[i] += _long_seconds(item)
    ordered: list[pytest.Item] = []
    left = len(items)
    for i in range(workers):
        share = left // (workers - i)
        take = max(0, share - len(heads[i]))
        ordered += heads[i] + rest[:take]
        del rest[:take]
        left -= len(heads[i]) + take
    items[:] = ordered + rest


def _long_seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("long")
    return float(marker.args[0]) if marker and marker.args else 15.0


@pytest.fixture
def no_leaked_threads():
    before = set(threading.enumerate())
    yield
    leaked = [
        t for t in threading.enumerate() if t not in before and t.is_alive() and t.name.startswith("gpuplay")
    ]
    assert not leaked, f"threads left running: {leaked}"


# -- pytest-xdist workers see the terminal the suite was started from --------------------------
# A worker process starts with COLUMNS=80 and LINES=24 in its environment, where the command that
# started the suite had none (CI unsets COLUMNS): every piped width was then 80 columns, and a
# test that reads a long line whole failed under `-n 2` only. The controller hands each worker
# its own two values, and the worker takes them before any test runs.
_TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["gpuplay_terminal_env"] = {k: os.environ.get(k) for k in _TERMINAL_ENV}


def pytest_configure(config):
    given = getattr(config, "workerinput", {}).get("gpuplay_terminal_env")
    for name, value in (given or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# -- no test leaves gpuplay's environment changed for the next ----------------------------------
# A fixture that set GPUPLAY_IN_PROCESS=1 by hand and never put it back made every later test in
# the same process measure in-process: two tests of the early engine failed in a serial run only.
# After each test's teardown (its module's fixtures included) gpuplay's variables must be as the
# suite found them; a test that left one changed errors, named, and the variable is put back.
_SUITE_ENV = {k: v for k, v in os.environ.items() if k.startswith("GPUPLAY_")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    now = {k: v for k, v in os.environ.items() if k.startswith("GPUPLAY_")}
    if now != _SUITE_ENV:
        changed = sorted(k for k in now.keys() | _SUITE_ENV.keys() if now.get(k) != _SUITE_ENV.get(k))
        for name in changed:
            if name in _SUITE_ENV:
                os.environ[name] = _SUITE_ENV[name]
            else:
                os.environ.pop(name, None)
        raise AssertionError(
            f"{item.nodeid} left the environment changed: {', '.join(changed)} (use monkeypatch)"
        )
    return result
