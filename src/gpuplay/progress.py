"""Progress of a measurement started from Python: a bar in a notebook where ipywidgets is
installed, one plain line per finished measurement on stderr otherwise (a script's log, a notebook
without widgets). Used by gpuplay.api; nothing here imports ipywidgets until a bar is shown."""

from __future__ import annotations

import sys
from typing import Any, Protocol

from gpuplay.core.storage.safetext import visible


class Progress(Protocol):
    def step(self, text: str) -> None: ...

    def close(self) -> None: ...


class TextProgress:
    def __init__(self, total: int, stream: Any = None) -> None:
        self.total, self.done = total, 0
        self.stream = stream if stream is not None else sys.stderr

    def step(self, text: str) -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {visible(text, one_line=True)}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class WidgetProgress:
    """An ipywidgets IntProgress with the last finished measurement beside it."""

    def __init__(self, total: int, widgets: Any, display: Any) -> None:
        self.bar = widgets.IntProgress(min=0, max=max(1, total), value=0)
        self.label = widgets.Label(value="")
        self.box = widgets.HBox([self.bar, self.label])
        display(self.box)

    def step(self, text: str) -> None:
        self.bar.value += 1
        # a Label shows text, never HTML: the label of a user's file is safe here
        self.label.value = f"{self.bar.value}/{self.bar.max} {visible(text, one_line=True)}"

    def close(self) -> None:
        self.bar.bar_style = "success" if self.bar.value >= self.bar.max else "warning"


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def make(total: int, enabled: bool = True) -> Progress | None:
    if not enabled or total <= 0:
        return None
    if in_kernel():
        try:
            import ipywidgets
            from IPython.display import display

            return WidgetProgress(total, ipywidgets, display)
        except Exception:  # ipywidgets absent or no front end to draw it: plain lines
            pass
    return TextProgress(total)
