"""Dense linear algebra: matmul, batched matmul, SVD, eigh, solve, least squares.

Each kernel takes the array module first (numpy, torch or cupy): the same code
runs on all three, which is the point a talk makes with the code view.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpuplay.core.process.lazynumpy import lazy_numpy
from gpuplay.core.workloads.base import Array, ArrayModule, Param, Workload, linalg_dtype_reason
from gpuplay.core.workloads.tolerance import dot

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())


def matmul(xp: ArrayModule, a: Array, b: Array) -> Array:
    return a @ b


def batched_matmul(xp: ArrayModule, a: Array, b: Array) -> Array:
    # np.matmul broadcasts over the batch and calls BLAS per matrix;
    # np.einsum('bij,bjk->bik') without optimize=True does not use BLAS.
    return xp.matmul(a, b)


def svd(xp: ArrayModule, a: Array) -> Array:
    return xp.linalg.svd(a)


def eigh(xp: ArrayModule, a: Array) -> Array:
    return xp.linalg.eigh(a)


def solve(xp: ArrayModule, a: Array, b: Array) -> Array:
    return xp.linalg.solve(a, b)


def lstsq(xp: ArrayModule, a: Array, b: Array) -> Array:
    return xp.linalg.lstsq(a, b, rcond=None)[0]


def lstsq_torch(torch: ArrayModule, a: Array, b: Array) -> Array:
    # torch's CPU default driver is gelsy (pivoted QR); on CUDA only gels exists.
    return torch.linalg.lstsq(a, b).solution


def _square(n: int) -> Param:
    return Param("n", int, 1024, "matrix order (n×n)", minimum=2, maximum=65536, size=True)


class Matmul(Workload):
    name = "matmul"
    title = "Matrix multiply"
    category = "linear algebra"
    params: tuple[Param, ...] = (_square(1024),)
    amp_eligible = True
    tol_scale = 4.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']}×{p['n']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        n = p["n"]
        return rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return matmul

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return inputs[0] @ inputs[1]

    def flops(self, p: Mapping[str, Any]) -> float:
        return 2.0 * p["n"] ** 3

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 3.0 * p["n"] ** 2 * itemsize

    def tolerance(self, compute_dtype: str, p: Mapping[str, Any]) -> float:
        # Inputs rounded once to the compute dtype, products accumulated (in float32 for half
        # precision and TF32) over k = n: 0.031 for a bfloat16 matmul at n = 2048.
        return dot(compute_dtype, p["n"])


class BatchedMatmul(Matmul):
    name = "batched_matmul"
    title = "Batched matrix multiply"
    params = (
        Param("batch", int, 64, "number of matrices", minimum=1, maximum=1 << 20, size=True),
        Param("n", int, 256, "matrix order (n×n)", minimum=2, maximum=16384),
    )

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['batch']}×{p['n']}²"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        shape = (p["batch"], p["n"], p["n"])
        return rng.standard_normal(shape), rng.standard_normal(shape)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return batched_matmul

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.matmul(inputs[0], inputs[1])

    def flops(self, p: Mapping[str, Any]) -> float:
        return 2.0 * p["batch"] * p["n"] ** 3

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 3.0 * p["batch"] * p["n"] ** 2 * itemsize


class _Factorization(Workload):
    category = "linear algebra"
    params: tuple[Param, ...] = (_square(1024),)
    graph_safe = False  # cuSOLVER checks its info code on the host
    half_ok = False

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['n']}×{p['n']}"

    def unsupported(self, backend: str, device: str, dtype: str, p: Mapping[str, Any]) -> str | None:
        return linalg_dtype_reason(backend, dtype)


class SVD(_Factorization):
    name = "svd"
    title = "Singular value decomposition"
    tol_scale = 20.0

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return (rng.standard_normal((p["n"], p["n"])),)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return svd

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.linalg.svd(inputs[0], compute_uv=False)

    def checked(self, out: Any, p: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(out[1])  # singular values: U and V are unique only up to sign

    def flops(self, p: Mapping[str, Any]) -> float:
        return 22.0 * p["n"] ** 3  # Golub & Van Loan, full U, S, V of a square matrix

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 3.0 * p["n"] ** 2 * itemsize


class Eigh(_Factorization):
    name = "eigh"
    title = "Symmetric eigendecomposition"
    tol_scale = 20.0

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        a = rng.standard_normal((p["n"], p["n"]))
        return ((a + a.T) / 2.0,)

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return eigh

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.linalg.eigvalsh(inputs[0])

    def checked(self, out: Any, p: Mapping[str, Any]) -> np.ndarray:
        return np.asarray(out[0])  # eigenvalues, ascending on every backend

    def flops(self, p: Mapping[str, Any]) -> float:
        return 9.0 * p["n"] ** 3  # tridiagonalisation + QR iteration with vectors

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        return 2.0 * p["n"] ** 2 * itemsize


class Solve(_Factorization):
    name = "solve"
    title = "Linear solve (LU)"
    params = (
        _square(1024),
        Param("nrhs", int, 1, "right-hand sides", minimum=1, maximum=65536),
    )
    tol_scale = 20.0

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        n = p["n"]
        # Diagonally shifted so the system is well conditioned at every size:
        # the check measures the solver's rounding, not the matrix's condition.
        a = rng.standard_normal((n, n)) + 2.0 * math.sqrt(n) * np.eye(n)
        return a, rng.standard_normal((n, p["nrhs"]))

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return solve

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        return np.linalg.solve(*inputs)

    def flops(self, p: Mapping[str, Any]) -> float:
        n, k = p["n"], p["nrhs"]
        return 2.0 / 3.0 * n**3 + 2.0 * n**2 * k

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        n, k = p["n"], p["nrhs"]
        return (n * n + 2.0 * n * k) * itemsize


class Lstsq(_Factorization):
    name = "lstsq"
    title = "Least squares (QR)"
    params = (
        Param("m", int, 2048, "rows (observations)", minimum=2, maximum=1 << 20, size=True),
        Param("n", int, 512, "columns (unknowns)", minimum=1, maximum=65536, size=True),
        Param("nrhs", int, 1, "right-hand sides", minimum=1, maximum=65536),
    )
    tol_scale = 50.0

    def size_label(self, p: Mapping[str, Any]) -> str:
        return f"{p['m']}×{p['n']}"

    def inputs(self, p: Mapping[str, Any], rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        return rng.standard_normal((p["m"], p["n"])), rng.standard_normal((p["m"], p["nrhs"]))

    def resolve(self, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
        p = super().resolve(given)
        if p["m"] < p["n"]:
            raise ValueError(f"m must be >= n for an overdetermined system; got m={p['m']}, n={p['n']}")
        return p

    def scaled(self, p: Mapping[str, Any], factor: float) -> dict[str, Any]:
        out = super().scaled(p, factor)
        out["m"] = max(out["m"], out["n"])
        return out

    def kernel_function(self, backend: str, p: Mapping[str, Any]) -> Callable[..., Any]:
        return lstsq_torch if backend == "torch" else lstsq

    def reference(self, p: Mapping[str, Any], inputs: tuple[np.ndarray, ...]) -> np.ndarray:
        a, b = inputs
        return np.linalg.lstsq(a, b, rcond=None)[0]

    def flops(self, p: Mapping[str, Any]) -> float:
        m, n, k = p["m"], p["n"], p["nrhs"]
        return 2.0 * m * n**2 - 2.0 / 3.0 * n**3 + 4.0 * m * n * k

    def bytes_moved(self, p: Mapping[str, Any], itemsize: int) -> float:
        m, n, k = p["m"], p["n"], p["nrhs"]
        return (m * n + m * k + n * k) * itemsize


WORKLOADS: list[Callable[[], Workload]] = [Matmul, BatchedMatmul, SVD, Eigh, Solve, Lstsq]
