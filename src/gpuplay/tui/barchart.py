"""A horizontal bar chart drawn as text: one line a bar, each labelled, its value written at its
end, the title (with the unit) above.

    lines = bar_lines(["numpy float32", "torch bfloat16"], [1.0, 2.62], ["1×", "2.62×"], width=44)

plotext's bar chart lost the labels of bars it had no row for (one of two kept, in hashing
order), dropped its title and unit at 80×24 and, given a label column, drew the longest bar past
its own frame: here every bar has its line and label, and nothing is drawn past `width`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

EIGHTHS = " ▏▎▍▌▋▊▉█"
MAX_LABEL_SHARE = 0.5  # a label takes at most half the width; a longer one is cut with …


def bar(value: float, top: float, cells: int) -> str:
    """`value` of `top` as a run of block characters `cells` wide at most (eighths of a cell)."""
    if not (top > 0 and value > 0 and cells > 0):
        return ""
    eighths = max(1, round(min(value / top, 1.0) * cells * 8))
    return "█" * (eighths // 8) + (EIGHTHS[eighths % 8] if eighths % 8 else "")


def bar_lines(
    labels: Sequence[str],
    values: Sequence[float],
    shown: Sequence[str],
    width: int,
    style: str = "magenta",
) -> list[Text]:
    """One line per bar, `width` columns at most: the label right-aligned, the bar, its value."""
    if not labels:
        return []
    label_w = min(max(len(x) for x in labels), max(6, int(width * MAX_LABEL_SHARE)))
    value_w = max(len(s) for s in shown)
    cells = max(1, width - label_w - value_w - 3)  # label, " ▕", bar, " ", value
    top = max(values)
    out = []
    for label, value, text in zip(labels, values, shown, strict=True):
        name = label if len(label) <= label_w else label[: label_w - 1] + "…"
        line = Text(no_wrap=True, overflow="crop")
        line.append(f"{name:>{label_w}} ▕")
        b = bar(value, top, cells)
        line.append(b, style=style)
        line.append(f" {text}")
        out.append(line)
    return out
