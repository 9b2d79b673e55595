"""Counts in words, for every front end: "1 operator call", "2.5 operator calls".

counted(1, "operator calls (a compiled graph's generated code counts as one)")
# "1 operator call (a compiled graph's generated code counts as one)"
"""

from __future__ import annotations

import math

# The plural nouns a counted phrase starts with, and their singular.
SINGULAR = {"calls": "call", "kernels": "kernel", "steps": "step", "pairs": "pair", "cores": "core"}


def singular(phrase: str) -> str:
    """`phrase` with its first plural noun (SINGULAR) made singular: 'CUDA kernels launched' →
    'CUDA kernel launched'; a phrase without one is unchanged."""
    words = phrase.split(" ")
    for i, w in enumerate(words):
        if w in SINGULAR:
            words[i] = SINGULAR[w]
            return " ".join(words)
    return phrase


def counted(n: float | None, phrase: str, digits: str = "g") -> str:
    """'<n> <phrase>', the phrase singular when n is exactly 1; '—' for no figure."""
    if n is None or isinstance(n, bool) or not math.isfinite(n):
        return f"— {phrase}"
    return f"{n:{digits}} {singular(phrase) if n == 1 else phrase}"
