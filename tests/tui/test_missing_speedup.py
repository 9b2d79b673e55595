"""Where a speedup is missing, why stays on screen in its place, in words; toasts name no
internal identifiers (field names such as cuda_graphs)."""

from __future__ import annotations

from gpuplay.core.result import RunResult
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.messages import RunFinished
from gpuplay.tui.widgets import SpeedupDigits
from tests.tui_helpers import record_notifications, tiny_scenarios, wait_until


async def test_a_baseline_that_cannot_run_is_explained_where_the_speedup_would_be(tmp_path, monkeypatch):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    seen = record_notifications(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("b")  # PyTorch: its speedup needs the NumPy baseline
        await wait_until(
            pilot,
            lambda: app.session.live_result is not None and app.session.live_result.spec.backend == "torch",
        )
        await wait_until(pilot, lambda: not app.session.baseline_running)
        # as if the paired job had never run: then it fails (its result names the configuration)
        app.session.baselines.clear()
        app.session.speedups.clear()
        why = "the NumPy step ran out of memory"
        app.post_message(
            RunFinished(
                app.session.run_id, RunResult(spec=app.spec, status="failed", message=why), "baseline"
            )
        )
        await pilot.pause()
        digits = app.query_one(SpeedupDigits)
        assert digits.speedup is None
        assert (
            digits.note.startswith("no speedup: NumPy on the CPU could not run the baseline")
            and why in digits.note
        )
        assert not any(why in m for m in seen)  # not a toast that disappears
        await pilot.pause(1.0)
        assert why in app.query_one(SpeedupDigits).note  # still there


async def test_cycle_toasts_say_the_control_not_its_field_name(tmp_path, monkeypatch):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.1, telemetry=False)
    titles: list[str] = []
    real = app.notify
    monkeypatch.setattr(
        app, "notify", lambda m, *a, **k: (titles.append(k.get("title", "")), real(m, *a, **k))
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await pilot.press("g")  # CUDA graphs: no other value on a CPU-only machine
        await pilot.pause()
    assert "CUDA graphs cannot be changed here" in titles
    assert not any("cuda_graphs" in t for t in titles)
