"""mkdocs hooks: the docs pages link to the repository's own files the way GitHub reads them.

A page under docs/ links to a screenshot as `../screenshots/NAME` and to a file outside docs/ as
`../benchmarks/results/NAME` (links that work when GitHub renders the page). The site has no such
paths, so:

- the screenshots and CHANGELOG.md are added to the site as `screenshots/NAME` and
  `CHANGELOG.md`, and a page's `../screenshots/…` and `../CHANGELOG.md` links point there;
- any other link out of docs/ becomes the path as code (there is no page to link to); a target
  that does not exist in the repository is a warning, which `mkdocs build --strict` turns into a
  failure, as it does for a broken link between pages.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.plugins.gpuplay")

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "screenshots"
# [text](../path) or ![alt](../path), optionally with an #anchor; the path leaves docs/.
OUT_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\.\./([^)#\s]+)(#[^)\s]*)?\)")


# Files outside docs/ that the site carries under the same path: a page's `../PATH` link to them
# becomes `PATH`.
CARRIED = ("CHANGELOG.md",)


def on_files(files: Files, config: Any) -> Files:
    carried = [f"screenshots/{p.name}" for p in sorted(SCREENSHOTS.iterdir()) if p.is_file()]
    for path in [*carried, *CARRIED]:
        files.append(
            File(
                path,
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def rewrite(m: re.Match[str]) -> str:
        bang, text, path, anchor = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        if not (ROOT / path).exists():
            log.warning("%s links to ../%s, which is not in the repository", page.file.src_uri, path)
        if path.startswith("screenshots/") or path in CARRIED:
            return f"{bang}[{text}]({path}{anchor})"
        if bang:
            return f"`{path}`"
        return text if text.startswith("`") else f"{text} (`{path}`)" if text != path else f"`{path}`"

    return OUT_LINK.sub(rewrite, markdown)
