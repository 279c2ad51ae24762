"""The stop signals of a worker's :meth:`run` (``install_signals=True``), for both workers."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

__all__ = ["SIGNALS", "installed"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What asks a worker to stop."""


@contextlib.contextmanager
def installed(install: bool, arm: Callable[[], Callable[[], None]]) -> Iterator[None]:
    """The block with the worker's handlers, if ``install``: ``arm()`` sets them and returns
    what puts the previous ones back, called when the block ends."""
    if not install:
        yield
        return
    disarm = arm()
    try:
        yield
    finally:
        disarm()
