"""Lines broken between figures, never inside one: "21.4 ms – 27.5 ms" may break after the dash,
never between "27.5" and "ms"; "3e-07✓ vs float64" breaks before "vs" if at all.

    keep_together(Text("10.2 ms – 11 ms"), 10)   # "10.2 ms –\\n11 ms"

Rich wraps at any whitespace, the no-break space included, so the text is broken here, at the
spaces allowed, into lines that fit; Rich then has nothing to wrap. A space written as U+00A0 by
the caller is never a break either (it is shown as a plain space). A word longer than the line
is left for Rich to fold.
"""

from __future__ import annotations

import re

from rich.text import Text

NBSP = "\u00a0"
UNITS = (
    r"ms|s|µs|us|ns|min|h|[kMGTP]?FLOP/s|[kMGTP]?B/s|[KMGT]iB|[kMGT]B|B|W|J|Hz|GHz|°C|%|×|"
    r"cores?|pairs?|steps?|calls?|samples?|threads?|rows?|columns?"
)
# A space that binds: a figure to its unit, "vs" to what follows (the break comes before it), a
# range's start to its dash
# (the break comes after "–"), a confidence level to its interval ("95% 1.94–2.06×").
BINDING = re.compile(
    rf"(?<=[\d.%×✓✗)]) (?=(?:{UNITS})(?![\w/]))"
    r"|(?<=\bvs) "
    r"| (?=[–→])"
    r"|(?<=%) (?=\d)"
    r"|(?<=\bthreads:) "
)


def breaks(plain: str) -> list[int]:
    """The positions of the spaces a line may break at."""
    bound = {m.start() for m in BINDING.finditer(plain)}
    return [i for i, ch in enumerate(plain) if ch == " " and i not in bound]


def keep_together(text: Text | str, width: int) -> Text:
    """`text` broken into lines of at most `width` columns at allowed spaces (existing newlines
    kept); styles kept. `width` < 1: unchanged but for the no-break spaces."""
    if isinstance(text, str):
        text = Text(text)
    out: list[Text] = []
    for para in text.split("\n", allow_blank=True):
        plain = para.plain
        if width < 1 or len(plain) <= width:
            out.append(para)
            continue
        cuts, start, last = [], 0, None
        for i in breaks(plain):
            if i - start > width and last is not None:
                cuts.append(last + 1)
                start = last + 1
            last = i
        if len(plain) - start > width and last is not None and last + 1 > start:
            cuts.append(last + 1)
        lines = list(para.divide(cuts))
        for line in lines:
            line.rstrip()  # in place: the space the line was broken at
        out.extend(lines)
    joined = Text("\n").join(out)
    joined.plain = joined.plain.replace(NBSP, " ")
    return joined


def at_most(text: Text | str, width: int, lines: int) -> tuple[Text, bool]:
    """`text` kept together in lines of `width` (keep_together), at most `lines` of them: past
    that the last one kept ends in "…" (never a line silently dropped). Returns it and whether
    it was cut, for the caller to offer the whole text elsewhere (a tooltip)."""
    kept = keep_together(text, width)
    rows = kept.split("\n", allow_blank=True)
    if width < 1 or lines < 1 or len(rows) <= lines:
        return kept, False
    last = rows[lines - 1]
    if len(last.plain) >= width:
        last = last[: max(width - 1, 0)]
    last = last.copy()
    last.rstrip()
    last.append("…")
    return Text("\n").join([*rows[: lines - 1], last]), True
