"""Text from outside (a file, a result, an exception, user code) made safe to show on a terminal.

A scenario title holding `\\x1b]0;…\\x07` retitles the user's terminal, `\\x1b[2J` clears it, and
U+202E reverses what follows. `visible` shows such characters instead of sending them: ESC as
␛, other C0/C1 controls and DEL as \\xNN, bidirectional overrides as \\uNNNN. Core has no Rich, so
front ends escape Rich markup on top (cli/output.py `esc`, tui `safe`).
"""

from __future__ import annotations

import html
import re

# C0 controls except tab and newline, DEL, C1 controls; and the bidi embeddings/overrides/isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _show(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "\x1b":
        return "␛"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, *, one_line: bool = False) -> str:
    """`text` as a string with every control character shown, not sent. `one_line` also shows
    newlines and tabs (for a title or a table cell that must stay one line)."""
    s = text if isinstance(text, str) else str(text)
    return (_CONTROL_ALL if one_line else _CONTROL).sub(_show, s)


def markdown_cell(text: object) -> str:
    """Outside text for one Markdown table cell or list item: controls shown (one line), HTML and
    Markdown specials escaped, so a `|` cannot split the row, a `[x](y)` cannot become a link and
    `<script>` stays text where the Markdown is rendered."""
    out = html.escape(visible(text, one_line=True), quote=False)
    for ch in "\\`*[]|#":  # not `_`: names are full of it (all_to_all), and it can only italicise
        out = out.replace(ch, "\\" + ch)
    return out
