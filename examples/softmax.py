"""Softmax over the rows of a matrix, the way NumPy code writes it.

In NumPy this is

    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)

The only changes: `np` is the `xp` argument, and `x.max(...)` is the array-API
function `xp.max(x, ...)`. The same lines then run on NumPy, PyTorch and CuPy.
Subtracting the row maximum keeps exp() from overflowing in float16.
"""

TITLE = "Softmax over rows"
PARAMS = {
    "rows": {"default": 4096, "help": "rows (independent softmaxes)"},
    "cols": {"default": 1024, "help": "length of each row"},
}
PRESETS = {"quick": {"rows": 512}, "published": {"rows": 16384, "cols": 4096}}


def inputs(rng, rows, cols):
    return rng.standard_normal((rows, cols)) * 4.0


def step(xp, x):
    e = xp.exp(x - xp.max(x, axis=1, keepdims=True))
    return e / xp.sum(e, axis=1, keepdims=True)


def flops(rows, cols):
    return 5.0 * rows * cols  # max, subtract, exp, sum, divide: one each per element


def bytes(itemsize, rows, cols):
    return 2.0 * rows * cols * itemsize  # the least any softmax moves: read x once, write once
