"""A Gaussian blur by rolls: shift the image and add, as image code often does in NumPy.

The 5-tap binomial kernel [1, 4, 6, 4, 1] / 16 approximates a Gaussian of σ = 1
pixel; applied along each axis it blurs in 2-D. `np.roll(a, k, axis=0)` becomes
`xp.roll(a, k, axis=0)`; borders wrap around, as np.roll's do.
"""

TITLE = "Gaussian blur by rolls (5-tap binomial)"
PARAMS = {
    "n": {"default": 2048, "help": "image side, pixels", "min": 8},
    "passes": {"default": 1, "help": "blurs in a row (σ grows as √passes)"},
}
PRESETS = {"quick": {"n": 512}, "published": {"n": 4096, "passes": 4}}


def inputs(rng, n, passes):
    return rng.random((n, n))


def blur_axis(xp, a, axis):
    near = xp.roll(a, 1, axis=axis) + xp.roll(a, -1, axis=axis)
    far = xp.roll(a, 2, axis=axis) + xp.roll(a, -2, axis=axis)
    return (6 * a + 4 * near + far) / 16


def step(xp, image, *, passes=1):
    for _ in range(passes):
        image = blur_axis(xp, blur_axis(xp, image, 0), 1)
    return image


def flops(n, passes):
    return 2 * 8.0 * n * n * passes  # per axis: 4 adds, 2 multiplies, 1 add, 1 divide


def bytes(itemsize, n, passes):
    return 2.0 * n * n * itemsize * passes  # read and write the image once per pass, at best
