"""Monte Carlo π: the fraction of random points in the unit square inside the quarter circle.

NumPy: `4 * np.mean(x**2 + y**2 <= 1)`. Array-API `mean` needs a floating array,
so the boolean mask is cast with `xp.astype(inside, x.dtype)` first. The points
are drawn once by NumPy (in inputs), so every backend counts the same points and
the check compares like with like; the estimate itself is π ± about 1.6/√n.
"""

TITLE = "Monte Carlo π"
PARAMS = {"n": {"default": 10_000_000, "help": "random points"}}
PRESETS = {"quick": {"n": 1_000_000}, "published": {"n": 100_000_000}}


def inputs(rng, n):
    return rng.random(n), rng.random(n)


def step(xp, x, y):
    inside = x * x + y * y <= 1.0
    return 4.0 * xp.mean(xp.astype(inside, x.dtype))


def flops(n):
    return 5.0 * n  # two squares, an add, a compare, the sum


def bytes(itemsize, n):
    return 2.0 * n * itemsize  # read x and y
