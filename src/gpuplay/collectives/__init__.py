"""Collective operations over torch.distributed, measured the way nccl-tests measures them.

The same code runs one process per rank under `torchrun` (many nodes) or under
`gpuplay collectives`, which launches local ranks itself. No Textual and no rich
here; click only in `cli`.
"""

from gpuplay.collectives.bandwidth import OPS, bus_factor
from gpuplay.collectives.sizes import format_size, parse_size, parse_sizes

__all__ = ["OPS", "bus_factor", "format_size", "parse_size", "parse_sizes"]
