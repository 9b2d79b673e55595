# Types of the package's face: __init__.py loads these names lazily (PEP 562).
from typing import Any

from gpuplay.api import (
    Comparison as Comparison,
)
from gpuplay.api import (
    Ladder as Ladder,
)
from gpuplay.api import (
    MeasurementError as MeasurementError,
)
from gpuplay.api import (
    Refused as Refused,
)
from gpuplay.api import (
    Result as Result,
)
from gpuplay.api import (
    Results as Results,
)
from gpuplay.api import (
    Sweep as Sweep,
)
from gpuplay.api import (
    Table as Table,
)
from gpuplay.api import (
    compare as compare,
)
from gpuplay.api import (
    load as load,
)
from gpuplay.api import (
    measure as measure,
)
from gpuplay.api import (
    run as run,
)
from gpuplay.api import (
    sweep as sweep,
)
from gpuplay.api import (
    tune as tune,
)

__version__: str
__all__: list[str]

def load_ipython_extension(ipython: Any) -> None: ...
