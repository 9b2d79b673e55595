"""NumPy on the host CPU: the baseline every speedup is measured against."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from gpuplay.core.backends.base import Availability, Backend, DeviceInfo, widen
from gpuplay.core.hw.system import cpu_count, cpu_name
from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.spec import RunSpec

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

# by name (NumPy reads them as its dtypes): no NumPy needed to build the table
NUMPY_DTYPES = {"float64": "float64", "float32": "float32", "float16": "float16"}


def blas_threads() -> int | None:
    """Threads NumPy's BLAS will use, as the BLAS library itself reports (None: threadpoolctl missing).

    Read live at every call; the libraries are found once (threadpoolctl's scan of every loaded
    library is 0.6-4 ms, and a sweep reads this at every point) and again after an import."""
    global _blas
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None

    if _blas is None or _blas[0] != len(sys.modules):  # a new import may have loaded another BLAS
        _blas = (
            len(sys.modules),
            [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"],
        )
    counts = [c.num_threads for c in _blas[1]]
    return max(counts) if counts else None


_blas: tuple[int, list[Any]] | None = None


class NumpyBackend(Backend):
    name = "numpy"
    title = "NumPy"

    def _probe(self) -> tuple[Availability, list[DeviceInfo]]:
        return Availability(True), [DeviceInfo("cpu", f"{cpu_name()} ({cpu_count()} cores)")]

    def version(self) -> str:
        return np.__version__

    def module(self) -> Any:
        import numpy  # NumPy itself, never the stand-in (lazynumpy): a step's every `xp.` is NumPy's

        return numpy

    def from_host(self, host: np.ndarray, device: str, dtype: str) -> np.ndarray:
        return np.ascontiguousarray(host, dtype=NUMPY_DTYPES[dtype])

    def to_host(self, x: Any) -> Any:
        if isinstance(x, tuple | list):
            return tuple(self.to_host(v) for v in x)
        return widen(np.asarray(x))

    def synchronize(self, device: str) -> None:
        pass

    def thread_counts(self) -> dict[str, int | None]:
        return {"numpy_blas": blas_threads()}

    @contextmanager
    def configured(self, spec: RunSpec) -> Iterator[list[str]]:
        notes: list[str] = []
        if spec.threads is None:
            yield notes
            return
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            notes.append(
                f"threads={spec.threads} not applied to NumPy's BLAS: threadpoolctl is not installed, "
                "so BLAS used its own default"
            )
            yield notes
            return
        with threadpool_limits(limits=spec.threads, user_api="blas"):
            yield notes
