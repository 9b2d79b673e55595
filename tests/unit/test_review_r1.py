"""Review of issue 34 row 1 (3bf7a82, 9138132): defects shown as failing tests."""

from __future__ import annotations

import time


def test_a_released_engine_is_group_killed_before_it_is_reaped(monkeypatch):
    """`_reap` says the group is killed before the engine is reaped, so its pid (the group's id)
    cannot have been reused. After `release`, the engine exits by itself and `close` (at exit)
    reaps it in `alive()` (Popen.poll) before `os.killpg(pid)`: the SIGKILL then goes to a group
    id that is free again, as often as every NumPy `run` now."""
    from gpuplay.core.engine import client as client_mod
    from gpuplay.core.engine.client import EngineClient
    from gpuplay.core.spec import RunSpec

    c = EngineClient(backends=("numpy",))
    assert c.run(RunSpec.make("matmul", {"n": 16}, budget_s=0.01, warmup=1)).status == "ok"
    c.release()
    deadline = time.monotonic() + 10
    while not c._engine_gone() and time.monotonic() < deadline:  # the engine ends on its own
        time.sleep(0.01)
    assert c._engine_gone()
    proc = c._proc
    reaped_at_killpg = []
    real = client_mod.os.killpg

    def killpg(pgid, sig):
        reaped_at_killpg.append(proc.returncode is not None)
        return real(pgid, sig)

    monkeypatch.setattr(client_mod.os, "killpg", killpg)
    c.close(wait=False)
    assert reaped_at_killpg == [False], "the engine was reaped before its group was killed"
