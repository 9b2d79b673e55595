"""Messages the app's threads post while it quits: nothing to draw, no traceback, the result logged.

Textual's shutdown removes the screens first, then handles the messages still queued, and only
then unmounts the app (where gpuplay stops the telemetry sampler and the runs). A telemetry tick, a
run's phase, samples or end, or the engine's probe posted in between found no screen: the app
raised ScreenStackError from `self.main` and printed its traceback after the terminal came back
(seen once in a soak run's teardown). The window is a few milliseconds wide, so the test posts the
messages exactly there: after Textual's `_close_all` (the one private hook, because only it is
that moment), as the sampler's and the runs' threads would.
"""

from __future__ import annotations

import dataclasses
import json

from textual.worker import Worker, WorkerState

from gpuplay.core.measure.telemetry import snapshot
from gpuplay.tui.app import GpuPlayApp
from gpuplay.tui.messages import ProbesDone, RunFinished, RunPhase, RunProgress, TelemetryTick
from tests.tui_helpers import tiny_scenarios, wait_until


def _fails() -> None:
    raise LookupError("its widget is gone")


async def test_messages_posted_while_quitting_draw_nothing_and_the_result_is_logged(tmp_path):
    app = GpuPlayApp([tiny_scenarios(tmp_path / "sc")], export_dir=tmp_path, budget_s=0.05, telemetry=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_until(pilot, lambda: app.session.live_result is not None)
        await wait_until(pilot, lambda: app.session.phase == "done")
        result = app.session.live_result
        late = dataclasses.replace(result, notes=[*result.notes, "finished while the app quit"])
        run_id = app.session.run_id
        close_all = app._close_all
        failed = app.run_worker(_fails, thread=True, exit_on_error=False)
        await wait_until(pilot, lambda: failed.state == WorkerState.ERROR)

        async def screens_gone_then_threads_post() -> None:
            await close_all()
            for message in (
                TelemetryTick(snapshot()),
                RunPhase(run_id, "timing"),
                RunProgress(run_id, [("timed", 0.001)]),
                ProbesDone(True),
                RunFinished(run_id, late, "live"),
                Worker.StateChanged(failed, WorkerState.ERROR),  # a tab's worker whose widget went
            ):
                app.post_message(message)

        app._close_all = screens_gone_then_threads_post  # type: ignore[method-assign]
        log = app.session_log.path
    # run_test re-raises what a handler raised: getting here is the first half of the test.
    assert app.return_code in (None, 0)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert any("finished while the app quit" in line.get("notes", []) for line in lines), lines[-1].keys()
