"""Shared set-up for the app's tests: tiny scenarios so each step takes milliseconds."""

from __future__ import annotations

from pathlib import Path

TINY = {
    "matmul": ("matmul", "n = 64"),
    "batched_matmul": ("batched_matmul", "batch = 4\nn = 32"),
    "svd": ("svd", "n = 32"),
    "eigh": ("eigh", "n = 32"),
    "solve": ("solve", "n = 48"),
    "lstsq": ("lstsq", "m = 64\nn = 16"),
    "elementwise": ("elementwise", "n = 20000"),
    "reductions": ("reductions", "n = 20000"),
    "fft1d": ("fft1d", "n = 2048"),
    "fft2d": ("fft2d", "n = 32"),
    "heat": ("heat", "n = 32\nsteps = 3"),
    "autograd": ("autograd", "n = 6"),
    "attention": ("attention", "batch = 1\nheads = 2\nseq = 32\ndim = 16"),
    "inference": ("inference", 'model = "mlp"\nbatch = 4\nwidth = 32'),
    "transfers": ("transfers", "n = 4096"),
    "transfers_overlap": ("transfers", 'n = 4096\nop = "overlap"'),
    "host_copy": ("transfers", 'n = 4096\nop = "copy"'),
    "fused": ("fused", "n = 20000"),
    "sparse": ("sparse", "n = 64\ndensity = 0.05"),
    "sparse_dense": ("sparse", 'n = 64\ndensity = 0.05\nformat = "dense"'),
    "scan": ("scan", "n = 20000"),
    "dataloader": ("dataloader", "batch = 4\nsize = 32"),
}


def tiny_scenarios(folder: Path) -> Path:
    """Override every built-in scenario with a tiny 'quick' preset (user folders win by name)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (workload, params) in TINY.items():
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\ntitle = "{name}"\nworkload = "{workload}"\n'
            f"[params]\n{params}\n[presets.quick]\n{params}\n[presets.published]\n{params}\n"
        )
    return folder


async def wait_until(pilot, predicate, timeout: float = 20.0) -> None:
    """Let the app run until `predicate()` holds (workers finish in their own threads)."""
    import asyncio
    import time

    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)
    await pilot.pause()


def record_notifications(app, monkeypatch) -> list[str]:
    """Every message the app passes to `notify` (a patched public method, not Textual's private list)."""
    messages: list[str] = []
    real = app.notify

    def notify(message, *args, **kwargs):
        messages.append(str(message))
        return real(message, *args, **kwargs)

    monkeypatch.setattr(app, "notify", notify)
    return messages
