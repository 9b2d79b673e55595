"""The output folder: a fixed plan of file names, never more than 8 files (what comes back).

Every stage writes one JSON file and a section of REPORT.md, nothing else (the tests stage keeps
the chunks' counts and failures in tests.json, the app stage its SVG screenshots inline in
app.json). The JSON is rewritten after each step, so a stage stopped at its limit still leaves
what it finished.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

MAX_FILES = 8  # the device tool brings back at most 8 files from $OUT
MAX_BYTES = 16 * 2**20  # … each at most 16 MiB

PLAN = {
    "REPORT.md": "every stage's report, one section each",
    "env.json": "env stage",
    "tests.json": "tests stage summary",
    "bench.json": "bench stage",
    "app.json": "app stage",
    "talk.json": "talk stage",
}
assert len(PLAN) <= MAX_FILES


class OutDirError(RuntimeError):
    pass


def _finite(obj: Any) -> Any:
    """JSON without NaN/inf (strict parsers refuse them)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


class OutDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def files(self) -> list[Path]:
        return [p for p in self.path.rglob("*") if p.is_file()]

    def _target(self, name: str) -> Path:
        if name not in PLAN:
            raise OutDirError(f"{name!r} is not in the output plan ({', '.join(PLAN)})")
        target = self.path / name
        if not target.exists() and len(self.files()) >= MAX_FILES:
            raise OutDirError(
                f"{self.path} already holds {len(self.files())} files; the device tool returns at most "
                f"{MAX_FILES}: empty it or give another folder"
            )
        return target

    def write(self, name: str, text: str) -> Path:
        data = text.encode("utf-8")
        if len(data) > MAX_BYTES:
            raise OutDirError(f"{name} would be {len(data) / 2**20:.1f} MiB, over {MAX_BYTES // 2**20} MiB")
        target = self._target(name)
        tmp = target.with_name(f".{name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)  # a stage killed mid-write leaves the last whole file
        return target

    def write_json(self, name: str, obj: Any) -> Path:
        return self.write(name, json.dumps(_finite(obj), indent=1, default=str) + "\n")

    def report_section(self, stage: str, markdown: str) -> Path:
        """Put `stage`'s section into REPORT.md, replacing an earlier one of the same stage."""
        path = self.path / "REPORT.md"
        old = path.read_text(encoding="utf-8") if path.exists() else "# gpuplay GPU verification\n"
        begin, end = f"<!-- {stage} -->", f"<!-- /{stage} -->"
        if begin in old and end in old:
            head, rest = old.split(begin, 1)
            old = head.rstrip("\n") + "\n" + rest.split(end, 1)[1].lstrip("\n")
        return self.write("REPORT.md", f"{old.rstrip()}\n\n{begin}\n{markdown.rstrip()}\n{end}\n")
