"""Deprecated: the old name of :mod:`fastlock.queues.base` (``QueueBase``, ``QueueOptions``,
``MAX_BATCH``, ...); every name here still works and warns."""

import warnings
from typing import Any

from . import base as _base


def __getattr__(name: str) -> Any:
    value = getattr(_base, name)
    warnings.warn(
        f"fastlock.queues.calls.{name} moved to fastlock.queues.base", DeprecationWarning, stacklevel=2
    )
    return value
