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
        return [s.label(with_dtype=False) for s in specs]
    shown = [k for k in keys if k in differing or k in ALWAYS]
    return [" ".join(p[k] for k in shown if k in p) for p in parts]
