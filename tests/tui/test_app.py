"""The playground driven through Textual's Pilot, on real NumPy and PyTorch with tiny sizes."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console
from textual.widgets import TabbedContent

from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.widgets import ControlsPanel, HelpScreen
from tests.tui_helpers import record_notifications, tiny_scenarios, wait_until


@pytest.fixture
def app(tmp_path):
    return GpuPlayApp(
        [tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path / "out", budget_s=0.1, telemetry=False
    )


def finished(app):
    return lambda: app.session.live_result is not None


async def test_first_run_measures_numpy_and_records_it(app):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        r = app.session.live_result
        assert r.status == "ok" and r.spec.backend == "numpy" and r.spec.workload == "matmul"
        assert r.check_ok
        assert r.conditions["threads"]["numpy_blas"] == r.spec.threads  # the live thread policy, shown
        assert app.session.results and app.session.phase == "done"
        assert app.session_log.path.exists()


async def test_flipping_backend_restarts_and_shows_speedup(app):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        await pilot.press("b")
        assert app.spec.backend == "torch"
        await wait_until(
            pilot,
            lambda: app.session.live_result is not None and app.session.live_result.spec.backend == "torch",
        )
        # The speedup is measured in pairs with NumPy, in a second job, and shown with its interval.
        await wait_until(pilot, lambda: app.session.speedup_for(app.spec) is not None)
        app.refresh_all()
        digits = app.query_one("#speedup")
        paired = app.session.speedup_for(app.spec)
        assert digits.speedup == pytest.approx(paired["point"])
        assert "NumPy float32" in digits.note and f"{paired['pairs']} pairs" in digits.note
        assert app.session.live_result.speedup == paired, "the compare table reads the same figure"


@pytest.mark.real_engine  # as the real app: the compile that `c` starts is the engine's, killed when the app ends
async def test_each_control_flips(app):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        await pilot.press("b")  # torch
        await pilot.press("t")
        assert app.spec.dtype == "float16"  # float32 → float16 (next available)
        await pilot.press("t", "t", "t")
        assert app.spec.dtype == "float32"
        await pilot.press("a")
        assert app.spec.amp == "fp16"
        await pilot.press("c")
        assert app.spec.compile == "default"
        await pilot.press("c", "c", "c")
        assert app.spec.compile == "off"
        await pilot.press("p")
        assert app.session.preset == "published"
        await pilot.press("l")
        assert app.spec.max_step_s == 10.0
        await pilot.press("space")
        assert app.runs.paused.is_set()
        await pilot.press("space")
        assert not app.runs.paused.is_set()
        await pilot.press("b")  # cupy is not available here: skipped, back to numpy
        assert app.spec.backend == "numpy" and app.spec.amp == "off" and app.spec.device == "cpu"


async def test_unavailable_option_is_disabled_with_reason(app, monkeypatch):
    notes = record_notifications(app, monkeypatch)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_until(pilot, lambda: app.probed)
        text = " ".join(app.query_one(ControlsPanel).reasons)
        assert "CuPy" in text and ("not installed" in text or "no CUDA device" in text)
        assert "cuda:0" in text
        before = app.spec
        await pilot.press("d")  # no cuda device: nothing else to choose
        assert app.spec == before
        assert any("cuda:0" in n for n in notes)


async def test_cancel_and_restart_keeps_one_measurement_at_a_time(app):
    running = []
    from gpuplay.core import runner

    real_run = runner.run
    peak = {"n": 0}
    lock = threading.Lock()

    def counting_run(*a, **k):
        with lock:
            running.append(1)
            peak["n"] = max(peak["n"], len(running))
        try:
            return real_run(*a, **k)
        finally:
            with lock:
                running.pop()

    runner.run = counting_run
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, finished(app))
            for _ in range(6):
                await pilot.press("b")
            await wait_until(
                pilot,
                lambda: app.session.live_result is not None and app.session.live_result.spec == app.spec,
            )
            assert peak["n"] == 1
            assert app.session.live_result.status == "ok"
    finally:
        runner.run = real_run


async def test_choosing_a_scenario(app):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        app.query_one("#scenarios").focus()
        await pilot.press("down")
        await wait_until(
            pilot, lambda: app.spec.workload == "batched_matmul" and app.session.live_result is not None
        )
        assert app.session.live_result.spec.workload == "batched_matmul"


async def test_failing_run_leaves_app_usable(app, monkeypatch):
    from gpuplay.core.workloads import linalg

    real_kernel = linalg.Matmul.kernel_function

    def broken(self, backend, p):
        def kernel(xp, a, b):
            raise RuntimeError("CUDA error: an illegal memory access (simulated)")

        return kernel

    monkeypatch.setattr(linalg.Matmul, "kernel_function", broken)
    notes = record_notifications(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        assert app.session.live_result.status == "failed"
        assert any("illegal memory access" in n for n in notes)
        monkeypatch.setattr(linalg.Matmul, "kernel_function", real_kernel)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.session.live_result is not None)
        assert app.session.live_result.status == "ok"


async def test_export_and_screenshot_write_files(app, tmp_path):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        await pilot.press("e")
        await pilot.press("s")
        await pilot.pause()
    out = tmp_path / "out"
    names = sorted(p.suffix for p in out.iterdir())
    assert names == [".csv", ".json", ".md", ".svg"]
    md = next(out.glob("*.md")).read_text()
    assert "numpy cpu float32" in md


async def test_views_and_help(app):
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, finished(app))
        await pilot.press("3")
        assert "def matmul(xp, a, b):" in app.query_one("#code-right").code_text
        await pilot.press("2")
        assert app.query_one("#compare-table").row_count >= 1
        from gpuplay.core.measure.telemetry import snapshot

        app.telemetry.latest = snapshot()  # this app samples nothing itself (telemetry=False): hand it one
        await pilot.press("4")
        assert app.query_one(TabbedContent).active == "telemetry"
        panel = app.query_one("#telemetry-full")
        assert panel.region.width > 0 and panel.region.height > 0  # on screen, not just mounted
        console = Console(width=120, record=True, file=io.StringIO())
        console.print(panel.content)
        text = console.export_text()
        assert (
            "CPU" in text
            and "gpuplay RSS" in text
            and f"{app.telemetry.latest.host.mem_total / 2**30:.1f} GiB" in text
        )
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_screen = app.screen
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")  # the same screen, kept: not composed and laid out again
        assert app.screen is help_screen
        await pilot.press("question_mark")  # ? closes it too
        assert not isinstance(app.screen, HelpScreen)


async def test_small_terminal_layout(app):
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, finished(app))
        assert app.screen.has_class("narrow")
        assert not app.query_one("#side-telemetry").display


async def test_runs_and_telemetry_keep_flowing_under_the_help_screen(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.3, telemetry=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await wait_until(
            pilot, lambda: app.session.live_result is not None and app.telemetry.latest is not None
        )
        await pilot.press("escape")
        assert app.session.live_result.status == "ok"
        await pilot.press("4")  # the telemetry view: host figures always, the NVML line when no driver
        assert app.telemetry.latest.host.mem_total > 0 and app.telemetry.latest.host.cpu_percent
        from gpuplay.core.measure.telemetry import nvml_status

        assert app.telemetry.nvml_line == nvml_status()


async def test_a_slow_cupy_probe_does_not_delay_the_first_measurement(tmp_path, monkeypatch):
    """cupy.cuda.is_available() can take >10 s: the app measures meanwhile and says 'probing'."""
    import time

    from gpuplay.core import backends
    from gpuplay.core.backends.base import Availability
    from gpuplay.core.backends.cupy_backend import CupyBackend

    release = threading.Event()

    def slow_probe(self):
        release.wait(30)
        return Availability(False, "CuPy: no CUDA device (slow probe)"), []

    backends.get_backend.cache_clear()
    monkeypatch.setattr(CupyBackend, "_probe", slow_probe)
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            t0 = time.monotonic()
            await wait_until(pilot, lambda: app.session.live_result is not None)
            assert time.monotonic() - t0 < 15
            panel = app.query_one(ControlsPanel)
            # Not yet known is not refused: no "✗ CuPy: CuPy: still probing", a "checking" line instead.
            assert panel.probing == ["CuPy"] and not any("CuPy" in r for r in panel.reasons)
            assert panel.lines[0].startswith("… checking CuPy") and not any(
                "✗ CuPy" in x for x in panel.lines
            )
            release.set()
            await wait_until(
                pilot, lambda: any("slow probe" in r for r in app.query_one(ControlsPanel).reasons)
            )
            assert not panel.probing and "✗ CuPy: no CUDA device (slow probe)" in panel.lines
    finally:
        release.set()
        backends.get_backend.cache_clear()
