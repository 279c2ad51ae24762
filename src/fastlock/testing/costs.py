"""Deprecated: the cost counters moved to :mod:`fastlock.tools.costs` (beside the benchmarks
that publish them); every name here still works and warns."""

import warnings
from typing import Any

from ..tools import costs as _costs


def __getattr__(name: str) -> Any:
    value = getattr(_costs, name)
    warnings.warn(
        f"fastlock.testing.costs.{name} moved to fastlock.tools.costs", DeprecationWarning, stacklevel=2
    )
    return value
