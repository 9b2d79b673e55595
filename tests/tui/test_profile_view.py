"""The Profile view renders a real torch CPU profile and refusals, with no torch in the widget."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable, Static

from gpuplay.core.runner.profile import profile_spec
from gpuplay.core.spec import RunSpec
from gpuplay.tui.profile_view import EMPTY, ProfileView


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ProfileView()


def text_of(app: App[None]) -> str:
    return str(app.query_one("#profile-summary", Static).render())


async def test_profile_view_shows_a_real_profile_then_a_refusal():
    data = profile_spec(RunSpec.make("fused", {"n": 1000}, backend="torch", warmup=1), steps=2)
    assert data["status"] == "ok"
    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(ProfileView)
        assert EMPTY[:20] in text_of(app)
        view.show(data)
        await pilot.pause()
        ops = app.query_one("#profile-ops", DataTable)
        assert ops.display and ops.row_count == len(data["top_ops"]) and ops.row_count >= 4
        assert not app.query_one("#profile-kernels", DataTable).display  # no CUDA kernels on a CPU
        shown = text_of(app)
        assert "9 operator calls" in shown and "overhead" in shown and "per step" in shown
        view.show(
            {
                "label": "numpy cpu float32",
                "status": "refused",
                "message": "torch.profiler sees PyTorch operators only",
            }
        )
        await pilot.pause()
        assert "refused" in text_of(app) and "PyTorch operators only" in text_of(app)
        assert not ops.display
        view.show(None)
        await pilot.pause()
        assert EMPTY[:20] in text_of(app)
