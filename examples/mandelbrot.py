"""The Mandelbrot set: escape counts of z ← z² + c on a grid, with no per-pixel Python loop.

Written with complex numbers split into real and imaginary arrays (half precision
has no complex type), and `xp.where` freezing each point once it escapes, so
nothing overflows. The loop over iterations stays in Python, as in NumPy.

Points on the set's boundary are chaotic: float32 rounding makes some of them escape
a few iterations earlier or later than in float64. The check allows for that
(TOLERANCE below); the error it shows is how much the picture changes.
"""

TITLE = "Mandelbrot set (escape counts)"
PARAMS = {
    "n": {"default": 512, "help": "grid side, points", "min": 8},
    "iters": {"default": 64, "help": "maximum iterations", "size": False},
}
PRESETS = {"quick": {"n": 128}, "published": {"n": 2048, "iters": 256}}
# Relative error of the counts allowed, per dtype: boundary points differ between precisions.
TOLERANCE = {"float32": 0.01, "float16": 0.5, "bfloat16": 0.5}


def inputs(rng, n, iters):
    re = [-2.0 + 2.6 * i / (n - 1) for i in range(n)]
    im = [-1.3 + 2.6 * i / (n - 1) for i in range(n)]
    import numpy as np

    cr, ci = np.meshgrid(np.array(re), np.array(im))
    return cr, ci


def step(xp, cr, ci, *, iters=64):
    zr = xp.zeros_like(cr)
    zi = xp.zeros_like(ci)
    count = xp.zeros_like(cr)
    for _ in range(iters):
        zr_next = zr * zr - zi * zi + cr
        zi_next = 2 * zr * zi + ci
        active = zr_next * zr_next + zi_next * zi_next <= 4.0
        zr = xp.where(active, zr_next, zr)
        zi = xp.where(active, zi_next, zi)
        count = count + xp.astype(active, cr.dtype)
    return count


def flops(n, iters):
    return 12.0 * n * n * iters


def bytes(itemsize, n, iters):
    return 3.0 * n * n * itemsize  # read c, write the counts; the iterates could stay in cache
