"""How far from the float64 reference a right result may land, per compute dtype and operation.

A tolerance is c · (the error a right result is expected to carry), from two things:

- the compute dtype's unit roundoff u (half the distance from 1 to the next number): float64
  2^-53, float32 2^-24, TF32 2^-11 (a 10-bit mantissa), bfloat16 2^-8, float16 2^-11;
- how the operation grows rounding errors. For the random inputs gpuplay uses, errors add up
  like a random walk, so their relative norm grows with the square root of the length of a
  sum (a dot product of length k: u·√k), or with log2 n for an FFT's or a pairwise sum's
  stages, and stays about u for an element-wise formula.

Half precision and TF32 round the inputs (and outputs) to few bits, but matrix units and CPU
kernels accumulate their products in float32: the rounding of the inputs costs about u of
the narrow type once, and only the float32 accumulation grows with k. A formula that grew
the narrow type's u with √k would let garbage pass (4·2^-7·√2048 = 1.41 for bfloat16).

The check compares the relative norm ||out − ref|| / ||ref||, so c leaves room for the
spread of that norm and for library differences (blocked sums, FMA, fast math), not for a
different answer: c = 8 unless a workload knows better.
"""

from __future__ import annotations

import math

UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "tf32": 2.0**-11,
    "bfloat16": 2.0**-8,
    "float16": 2.0**-11,
}
# The accumulator of a dot product or sum in each compute dtype (matrix units, oneDNN, cuBLAS).
ACCUMULATOR = {"float64": "float64", "float32": "float32", "tf32": "float32", "bfloat16": "float32",
               "float16": "float32"}  # fmt: skip
SAFETY = 8.0


def unit_roundoff(dtype: str) -> float:
    try:
        return UNIT_ROUNDOFF[dtype]
    except KeyError:
        raise ValueError(f"no unit roundoff known for {dtype!r}") from None


def elementwise(dtype: str, c: float = SAFETY) -> float:
    """A formula of a few operations per element: each output rounded a few times."""
    return c * unit_roundoff(dtype)


def dot(dtype: str, k: int, c: float = SAFETY) -> float:
    """A matrix product with inner dimension k: inputs rounded once, accumulation grows ~√k."""
    u_acc = unit_roundoff(ACCUMULATOR[dtype])
    return c * (unit_roundoff(dtype) + u_acc * math.sqrt(max(1, k)))


def summed(dtype: str, n: int, c: float = SAFETY) -> float:
    """A (pairwise or blocked) reduction of n values: rounding grows ~log2 n in the accumulator."""
    u_acc = unit_roundoff(ACCUMULATOR[dtype])
    return c * (unit_roundoff(dtype) + u_acc * max(1.0, math.log2(max(2, n))))


def fft(dtype: str, n: int, c: float = SAFETY) -> float:
    """An FFT of n points: log2 n butterfly stages, each rounding in the compute dtype."""
    return c * unit_roundoff(dtype) * max(1.0, math.log2(max(2, n)))


def iterated(dtype: str, steps: int, c: float = SAFETY) -> float:
    """A stable iteration (a smoothing stencil): per-step roundings add like a random walk."""
    return c * unit_roundoff(dtype) * math.sqrt(max(1, steps))


def running_sum(dtype: str, n: int, c: float = SAFETY) -> float:
    """A scan (every prefix sum of n values): the last prefix sums n terms. A sequential loop
    (NumPy's cumsum) grows rounding like a random walk, ~√n in the accumulator; a parallel
    scan's tree grows it ~log2 n, inside the same bound. The narrow type's u is paid once,
    rounding each prefix. Where a library accumulates in the narrow type itself (NumPy's
    float16 cumsum), a large prefix stops growing and the check rightly fails."""
    u_acc = unit_roundoff(ACCUMULATOR[dtype])
    return c * (unit_roundoff(dtype) + u_acc * math.sqrt(max(1, n)))


# -- an operation's error growth as a user code file declares it -----------------------------
# ERROR_GROWTH = "elementwise", or (kind, length): length a PARAMS name or a positive integer.
GROWTH_WITH_LENGTH = {"dot": dot, "summed": summed, "fft": fft, "iterated": iterated,
                      "running_sum": running_sum}  # fmt: skip


def declared_growth(dtype: str, growth: object, params: dict[str, object]) -> float:
    """The tolerance for a declared growth; ValueError saying what is accepted when it is not."""
    usage = (
        f"ERROR_GROWTH must be 'elementwise' or (kind, length) with kind one of "
        f"{', '.join(GROWTH_WITH_LENGTH)} and length a PARAMS name or a positive integer; got {growth!r}"
    )
    if growth == "elementwise":
        return elementwise(dtype)
    if not (isinstance(growth, tuple | list) and len(growth) == 2 and growth[0] in GROWTH_WITH_LENGTH):
        raise ValueError(usage)
    kind, length = growth
    n = params.get(length) if isinstance(length, str) else length
    if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n) or n < 1:
        raise ValueError(usage)
    return float(GROWTH_WITH_LENGTH[kind](dtype, int(n)))
