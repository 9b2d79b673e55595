"""Arguments checked at the door, in words that name the argument, what it got and what it takes.

The Python API (`gpuplay.run`, `compare`, `measure`, `load`, `Results.compare`) and the CLI share
these: a wrong kind of value is a TypeError naming the argument (never one from deep inside, such
as "'int' object is not iterable"), and a misspelt name is answered with the closest known one
(difflib.get_close_matches, as click does for commands).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from gpuplay.core.storage.safetext import visible

F = TypeVar("F", bound=Callable[..., Any])


def shown(value: Any, limit: int = 60) -> str:
    """A value as an error message quotes it: its repr, controls shown, cut to `limit` characters."""
    text = visible(repr(value), one_line=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def kind_of(value: Any) -> str:
    return type(value).__name__


def closest(word: str, known: Iterable[str], n: int = 1) -> list[str]:
    """The known names closest to `word` (a typo's intended name), best first; [] when none is near."""
    import difflib  # here: only a typo needs it (~0.8 ms of an import otherwise)

    names = [str(k) for k in known]
    by_case = {k.lower(): k for k in names}
    hits = difflib.get_close_matches(str(word).lower(), list(by_case), n=n, cutoff=0.6)
    return [by_case[h] for h in hits]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """ "; did you mean 'x'?" for the closest known name, or '' when none is close."""
    hit = closest(word, known)
    return f"; did you mean {hit[0]!r}?" if hit else ""


def expect_names(name: str, value: Any, example: str) -> None:
    """A list of names (backends, devices): a string ('numpy,torch') or a list/tuple of strings."""
    if isinstance(value, str):
        return
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return
    raise TypeError(
        f"{name} takes a comma-separated string or a list of names, e.g. {name}={example}; "
        f"got {shown(value)} ({kind_of(value)})"
    )


def expect_mapping(name: str, value: Any, example: str) -> None:
    """A mapping of names to values (params=, over=), or None."""
    if value is None or isinstance(value, Mapping):
        if value is not None and not all(isinstance(k, str) for k in value):
            bad = next(k for k in value if not isinstance(k, str))
            raise TypeError(f"{name}'s keys must be parameter names (strings); got {shown(bad)}")
        return
    raise TypeError(f"{name} takes a dict of parameter names to values, e.g. {name}={example}; "
                    f"got {shown(value)} ({kind_of(value)})")  # fmt: skip


def expect_callable(name: str, value: Any, takes: str) -> None:
    """A function defined with def (measure's step and inputs)."""
    if callable(value) and hasattr(value, "__code__") and hasattr(value, "__name__"):
        return
    raise TypeError(
        f"{name} takes a function defined with def ({takes}); got {shown(value)} ({kind_of(value)})"
    )


def expect_path(name: str, value: Any, takes: str = "a file's path") -> None:
    """A path: a str or an os.PathLike, not empty."""
    if isinstance(value, str | os.PathLike):
        if isinstance(value, str) and not value.strip():
            raise ValueError(f"{name} is an empty path; it takes {takes}")
        return
    raise TypeError(f"{name} takes {takes} (a str or pathlib.Path); got {shown(value)} ({kind_of(value)})")


def expect_text(name: str, value: Any, takes: str) -> None:
    """One name (a scenario, a dtype): a str."""
    if isinstance(value, str):
        return
    raise TypeError(f"{name} takes {takes} (a str); got {shown(value)} ({kind_of(value)})")


def unknown_keyword(word: str, known: Iterable[str], where: str, more: str = "") -> str:
    """ "unknown keyword 'bakend'; did you mean 'backend'? known: …" — the closest among every
    keyword the call takes (its own arguments and its levers)."""
    names = sorted(set(known))
    hint = did_you_mean(word, names) or ";"
    return f"{where}: unknown keyword {word!r}{hint} known: {', '.join(names)}{more}"


def keywords_checked(f: F) -> F:
    """`f` whose misspelt keyword is a TypeError naming the closest one it takes: Python's own
    *unexpected keyword argument 'bakends'* says nothing of `backends`. A function with **kwargs
    checks those itself (gpuplay.run: its levers)."""
    params = inspect.signature(f).parameters
    takes = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    @functools.wraps(f)
    def checked(*args: Any, **kwargs: Any) -> Any:
        for key in kwargs:
            if key not in params:
                hint = did_you_mean(key, takes) or ";"
                raise TypeError(
                    f"{f.__name__}() got an unexpected keyword argument {key!r}{hint} it takes: {', '.join(takes)}"
                )
        return f(*args, **kwargs)

    return checked  # type: ignore[return-value]
