"""TOML and JSON parsing that a hostile file cannot crash.

`tomllib` and `json` recurse once per level of nesting: `[[[[…]]]]` ten thousand deep raises
RecursionError, which no loader expects, and one bad scenario would stop every command. These
turn it into the parser's own decode error, so each loader names the file as it does for any
other bad file and the rest still load.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

TOO_DEEP = "nested too deeply"


def toml_loads(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(TOO_DEEP) from None


def json_loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(TOO_DEEP, text[:0], 0) from None
