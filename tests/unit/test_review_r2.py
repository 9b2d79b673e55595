"""Review r2 of h4's merge (issue 34, row 1): what the check reads after the cold-allocation probe
in a paired run, and the add-a-workload guide against the lazy workload table."""

from __future__ import annotations

import numpy as np

from gpuplay.core.spec import RunSpec


def test_a_paired_baseline_s_check_reads_its_probe_s_last_output_as_an_unpaired_run_does(monkeypatch):
    # The baseline's own row is probed (baseline_after → allocation) and then checked: its check
    # reads the probe's last output, as `run` does, instead of keeping that output alive through
    # one more step (two outputs held at once, and one step more than an unpaired run).
    from gpuplay.core.compare import baseline_spec
    from gpuplay.core.runner import clear_caches
    from gpuplay.core.runner.measure import _Measurement
    from gpuplay.core.runner.paired import run_pair
    from gpuplay.core.workloads import linalg

    n = 640  # 3 × 640² float32: past the probe's 4 MiB
    events: list[str] = []
    real_matmul, real_phase = linalg.matmul, _Measurement.phase

    def counted(xp, a, b):
        if isinstance(a, np.ndarray) and a.shape[0] == n:
            events.append("numpy step")
        return real_matmul(xp, a, b)

    def phase(self, name, detail=""):
        events.append(f"{self.plan.spec.backend} {name}")
        real_phase(self, name, detail)

    monkeypatch.setattr(linalg, "matmul", counted)
    monkeypatch.setattr(_Measurement, "phase", phase)
    clear_caches()
    spec = RunSpec.make("matmul", {"n": n}, backend="torch", repeat=4, threads=1, warmup=1)
    r, base = run_pair(spec, baseline_spec(spec))
    assert r.status == "ok" and base is not None and base.status == "ok", (r.message, base)
    probe = base.conditions["alloc_cold_probe"]
    after_probe = events[len(events) - 1 - events[::-1].index("numpy allocation") :]
    assert after_probe.count("numpy step") == probe["steps"], after_probe
    assert base.check_ok is True and base.error is not None and 0 < base.error < base.tolerance


def test_the_add_a_workload_guide_registers_a_workload_where_the_registry_reads_it():
    # The registry is WORKLOAD_MODULES (name → module, imported when first named), not a module
    # list in registry(): a guide that says otherwise leaves a new workload unregistered.
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    step = text[text.index("3. **Register it**") : text.index("4. **A scenario file**")]
    assert "WORKLOAD_MODULES" in step and "to `registry()`" not in step, step
    guide = text[text.index("1. **The kernels**") : text.index("3. **Register it**")]
    assert "lazy_numpy" in guide, "a new workload module must not import NumPy at its top"
