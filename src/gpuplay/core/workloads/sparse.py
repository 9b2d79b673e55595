"""Sparse products: SpMV and SpMM in CSR, against the same product done dense.

SciPy's CSR on the CPU (the NumPy backend's baseline), `torch.sparse_csr_tensor`
(via `to_sparse_csr`) on PyTorch, `cupyx.scipy.sparse` (cuSPARSE) on CuPy.
`format=dense` runs the same matrix as a dense GEMV/GEMM, so sweeping `density`
shows where CSR stops paying: the crossover density.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import EPS, Param, Workload

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

INDEX_BYTES = 4  # int32 column indices (SciPy, torch and cuSPARSE use int32 below 2³¹ entries)


def product(xp: Any, a: Any, x: Any) -> Any:
    # CSR or dense, the code is the same: the format decides which kernel runs.
    return a @ x


def _scipy_sparse_installed() -> bool:
    """Whether SciPy is there, not SciPy itself: the planner asks on the UI thread at each switch
    to this scenario, and `import scipy.sparse` there cost ~0.17 s and 9 MiB in the app, which
    never runs it (the engine does). A module marked missing in sys.modules counts as missing."""
    if "scipy.sparse" in sys.modules:
        return sys.modules["scipy.sparse"] is not None
    return importlib.util.find_spec("scipy") is not None


def to_csr(backend: str, a: Any) -> Any:
    if backend == "torch":
        with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
            warnings.simplefilter("ignore", UserWarning)
            return a.to_sparse_csr()
    if backend == "cupy":
        import cupyx.scipy.sparse

        return cupyx.scipy.sparse.csr_matrix(a)
    import scipy.sparse

    return scipy.sparse.csr_array(a)


class Sparse(Workload):
    name = "sparse"
    title = "Sparse × dense: SpMV / SpMM (CSR)"
    category = "sparse"
    params = (
        Param("n", int, 4096, "matrix order (n×n)", minimum=2, maximum=1 << 20, size=True),
        Param("density", float, 0.01, "fraction of non-zero entries", minimum=1e-6, maximum=1.0),
        Param("op", str, "spmv", "spmv: A·x; spmm: A·X with k columns", choices=("spmv", "spmm")),
        Param("k", int, 64, "columns of X (spmm)", minimum=1, maximum=65536),
        Param("format", str, "csr", "csr, or dense for the crossover", choices=("csr", "dense")),
    )
    amp_eligible = False
    graph_safe = False
    compile_safe = False
    half_ok = False
    tol_scale = 10.0

    def _cols(self, p: Mapping[str, Any]) -> int:
        return int(p["k"]) if p["op"] == "spmm" else 1

    def size_label(self, p: Mapping[str, Any]) -> str:
        shape = f"{p['n']}² @ {p['n']}×{p['k']}" if p["op"] == "spmm" else f"{p['n']}² @ {p['n']}"
        return f"{shape}, density {p['density']:g}, {p['format']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        n = p["n"]
        a = np.zeros((n, n))
        nnz = max(1, round(p["density"] * n * n))
        flat = rng.choice(n * n, size=nnz, replace=False) if nnz < n * n else np.arange(n * n)
        a.ravel()[flat] = rng.standard_normal(flat.size)
        x = rng.standard_normal((n, p["k"]) if p["op"] == "spmm" else n)
        return a, x

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return product

    def helper_functions(self, backend: str, p: Mapping[str, Any]) -> list[Callable[..., Any]]:
        return [to_csr] if p["format"] == "csr" else []

    def prepare(
        self, backend: str, device: str, args: tuple[Any, ...], p: Mapping[str, Any]
    ) -> tuple[Any, ...]:
        a, x = args
        return (to_csr(backend, a) if p["format"] == "csr" else a), x

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.asarray(inputs[0] @ inputs[1])

    def nnz(self, p: Mapping[str, Any]) -> float:
        return max(1.0, round(p["density"] * p["n"] ** 2))

    def flops(self, p: Mapping[str, Any]) -> float:
        entries = self.nnz(p) if p["format"] == "csr" else float(p["n"]) ** 2
        return 2.0 * entries * self._cols(p)

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        n, cols = p["n"], self._cols(p)
        matrix = self.nnz(p) * (itemsize + INDEX_BYTES) + (n + 1) * INDEX_BYTES
        if p["format"] == "dense":
            matrix = float(n) * n * itemsize
        return matrix + 2.0 * n * cols * itemsize

    def footprint_elements(self, p: Mapping[str, Any]) -> float:
        return 2.0 * p["n"] ** 2 + 2.0 * p["n"] * self._cols(p)  # the dense source and its CSR

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        return self.tol_scale * EPS[compute_dtype] * max(1.0, math.log2(p["n"]))

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        if p["format"] == "csr" and dtype not in ("float32", "float64"):
            return f"sparse CSR products in {dtype} are not implemented by SciPy or on the CPU; use float32"
        if backend == "numpy" and p["format"] == "csr" and not _scipy_sparse_installed():
            return "SciPy is not installed (it is NumPy's CSR baseline): pip install scipy"
        return None

    def notes(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> list[str]:
        lib = {
            "numpy": "SciPy csr_array",
            "torch": "torch sparse CSR",
            "cupy": "cupyx.scipy.sparse (cuSPARSE)",
        }
        what = lib[backend] if p["format"] == "csr" else "dense"
        return [
            f"sparse: {what}, {self.nnz(p):,.0f} non-zeros ({p['density']:g}); flops count "
            + ("non-zeros only" if p["format"] == "csr" else "every entry, zeros included")
        ]


WORKLOADS: list[Callable[[], Workload]] = [Sparse]
