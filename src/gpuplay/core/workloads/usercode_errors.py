"""What is wrong with a user's code file, as words: the error a measurement of one can raise.

Apart from `usercode` (its loader, ~740 lines with `ast`, `hashlib` and `linecache`) so that the
runner, which names this error, does not import the loader in an engine that measures no code
file. `gpuplay.core.workloads.usercode` re-exports both names.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path


# -- errors --------------------------------------------------------------------
@dataclass(frozen=True)
class Frame:
    """One traceback frame inside the user's file."""

    lineno: int
    function: str
    line: str


class UserCodeError(ValueError):
    """What is wrong with a user's code file: a one-line summary plus the frames in that file.

    A ValueError, so the planner turns a bad file into a refusal with these words.
    """

    def __init__(
        self, path: Path | str, problem: str, frames: tuple[Frame, ...] = (), hint: str = ""
    ) -> None:
        self.path = Path(path)
        self.problem = problem
        self.frames = frames
        self.hint = hint
        super().__init__(self.summary)

    @property
    def summary(self) -> str:
        where = f"{self.path.name}:{self.frames[-1].lineno}" if self.frames else self.path.name
        text = f"{where}: {self.problem}"
        return f"{text} ({self.hint})" if self.hint else text

    @property
    def detail(self) -> str:
        """The traceback, cut down to the frames in the user's file, as Python prints them."""
        if not self.frames:
            return ""
        lines = [f"Traceback (your code, {self.path}):"]
        for f in self.frames:
            lines.append(f'  File "{self.path}", line {f.lineno}, in {f.function}')
            if f.line:
                lines.append(f"    {f.line}")
        lines.append(self.problem)
        return "\n".join(lines)

    @classmethod
    def from_exception(cls, path: Path, exc: BaseException, what: str) -> UserCodeError:
        """`what` raised `exc`: keep only the traceback frames from the user's own file."""
        frames = user_frames(path, exc)
        problem = f"{what} raised {type(exc).__name__}: {_first_line(exc)}"
        return cls(path, problem, frames)


def user_frames(path: Path, exc: BaseException) -> tuple[Frame, ...]:
    target = str(path)
    out = []
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename == target:
            out.append(Frame(fs.lineno or 0, fs.name, (fs.line or "").strip()))
    return tuple(out)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
