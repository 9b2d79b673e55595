# Types of the package's face: __init__.py loads these names lazily (PEP 562).
from typing import Any

from gpuplay.api import (
    Comparison as Comparison,
    MeasurementError as MeasurementError,
    Refused as Refused,
    Result as Result,
    Results as Results,
    Sweep as Sweep,
    Table as Table,
    compare as compare,
    load as load,
    measure as measure,
    run as run,
    sweep as sweep,
)

__version__: str
__all__: list[str]

def load_ipython_extension(ipython: Any) -> None: ...
