"""Review r2 of h4's merge (issue 34, row 1): the add-a-workload guide against the lazy workload
table and the lazily bound NumPy."""

from __future__ import annotations


def test_the_add_a_workload_guide_registers_a_workload_where_the_registry_reads_it():
    # The registry is WORKLOAD_MODULES (name → module, imported when first named), not a module
    # list in registry(): a guide that says otherwise leaves a new workload unregistered.
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    step = text[text.index("3. **Register it**") : text.index("4. **A scenario file**")]
    assert "WORKLOAD_MODULES" in step and "to `registry()`" not in step, step
    guide = text[text.index("1. **The kernels**") : text.index("3. **Register it**")]
    assert "lazy_numpy" in guide, "a new workload module must not import NumPy at its top"
