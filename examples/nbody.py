"""One step of an all-pairs N-body simulation (gravity with softening), leapfrog.

NumPy writes the pairwise separations with broadcasting, `pos[None, :, :] - pos[:, None, :]`;
the array API spells the new axes `xp.expand_dims`. Everything else is the NumPy code.
The step returns positions and velocities; gpuplay checks both.
"""

TITLE = "N-body step (all pairs)"
PARAMS = {
    "n": {"default": 1024, "help": "bodies", "min": 2},
    "dt": {"default": 0.01, "help": "time step"},
    "soft": {"default": 0.05, "help": "softening length"},
}
PRESETS = {"quick": {"n": 256}, "published": {"n": 4096}}


def inputs(rng, n, dt, soft):
    pos = rng.standard_normal((n, 3))
    vel = 0.1 * rng.standard_normal((n, 3))
    mass = rng.random(n) / n
    return pos, vel, mass


def step(xp, pos, vel, mass, *, dt=0.01, soft=0.05):
    d = xp.expand_dims(pos, axis=0) - xp.expand_dims(pos, axis=1)  # d[i, j] = pos[j] - pos[i]
    r2 = xp.sum(d * d, axis=-1) + soft * soft
    w = xp.expand_dims(xp.expand_dims(mass, axis=0) / (r2 * xp.sqrt(r2)), axis=-1)
    acc = xp.sum(d * w, axis=1)
    vel = vel + dt * acc
    return pos + dt * vel, vel


def flops(n, dt, soft):
    return 20.0 * n * n  # per pair: 3 subtracts, 3 squares + 2 adds, softening, sqrt, divide, 6 multiply-adds


def bytes(itemsize, n, dt, soft):
    return 13.0 * n * itemsize  # pos, vel, mass in; pos, vel out (the n² temporaries are the cost)
