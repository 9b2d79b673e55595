"""NumPy bound into a module's globals at its first use rather than at the module's import.

The workloads and the backends' base say what a computation is (its parameters, its cost, its
refusals) as well as how it runs: the front end plans a NumPy run from the first half alone and,
with NumPy imported at their top, paid ~90 ms for the import on the 2-core machine. A module writes

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = lazy_numpy(globals())

and uses `np` as before. The first attribute read (`np.float64`, `np.random`) imports NumPy and
puts the module itself in the module's globals, so every later `np` there is NumPy, not this
stand-in: a timed step that names `np` pays nothing for it. A stand-in passed on before any
read (`heat(np, a)`) still answers every attribute, as NumPy.
"""

from __future__ import annotations

from typing import Any


class LazyNumpy:
    """Stands for NumPy in one module's globals until the first attribute is read."""

    __slots__ = ("_namespace",)

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        import numpy

        if self._namespace.get("np") is self:
            self._namespace["np"] = numpy
        return getattr(numpy, name)

    def __repr__(self) -> str:
        return "<NumPy, imported at its first use>"


def lazy_numpy(namespace: dict[str, Any]) -> Any:
    return LazyNumpy(namespace)
