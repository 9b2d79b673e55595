"""Labels that tell rows apart: each names the backend and whatever else differs between the rows
(device, dtype, levers), so four PyTorch rows that differ in dtype or AMP no longer all read
"torch cpu".

    distinct_labels([numpy_f32, torch_f32, torch_bf16, torch_amp])
    # ['numpy float32', 'torch float32', 'torch bfloat16', 'torch float32 +amp:fp16']
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplay.core.spec import RunSpec

ALWAYS = ("backend",)  # a row always says which library ran it


def distinct_labels(specs: Sequence[RunSpec]) -> list[str]:
    """One label per spec, in order: the backend, then each part of the label (device, dtype,
    a lever's setting) that is not the same in every row. A part left at its default in some rows
    and set in others differs. Rows alike in every part read as `label(with_dtype=False)`."""
    parts = [dict(s.label_parts()) for s in specs]
    keys = list(dict.fromkeys(k for p in parts for k in p))
    differing = {k for k in keys if len({p.get(k) for p in parts}) > 1}
    if not differing - set(ALWAYS):
        labels = [s.label(with_dtype=False) for s in specs]
    else:
        shown = [k for k in keys if k in differing or k in ALWAYS]
        labels = [" ".join(p[k] for k in shown if k in p) for p in parts]
    return _runs_numbered(specs, labels)


def _runs_numbered(specs: Sequence[RunSpec], labels: list[str]) -> list[str]:
    """The same configuration measured again reads 'torch float32 · run 2' (its first run keeps
    the plain label): two rows alike in every word told the reader nothing."""
    seen: dict[RunSpec, int] = {}
    out = []
    for spec, label in zip(specs, labels, strict=True):
        seen[spec] = seen.get(spec, 0) + 1
        out.append(label if seen[spec] == 1 else f"{label} · run {seen[spec]}")
    return out
