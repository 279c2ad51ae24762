"""Fork-safe identities: ids no other process, thread or earlier fork repeats.

``next_id()`` is a random 64-bit prefix drawn per process (16 hex digits), ``-``, then a
counter in hex; ``ids`` is the same source as an iterator, and ``fresh(n, delay_ms)`` /
``fresh_id(core, delay_ms)`` its next ids as fresh job ids, after their due time (written by the
core's ``_fresh`` / ``_fresh_id``).
``local.tag`` is the calling thread's own id plus ``-``: unique per thread
of this process (a new thread never inherits a dead one's). A forked child starts both
afresh, so nothing built before ``fork()`` gives the child an identity of its parent.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator

from ._impl import Core, default_core

__all__ = ["fresh", "fresh_id", "ids", "local", "next_id"]


class _ThreadTag(threading.local):
    tag: str

    def __init__(self) -> None:
        self.tag = next_id() + "-"


ids: Iterator[str]
next_id: Callable[[], str]
local: _ThreadTag
_prefix: str  # this process's random prefix and its "-"
_numbers: Iterator[int]  # the counter after it, shared by ids and take


def fresh(n: int, delay_ms: int = 0, core: Core | None = None) -> list[str]:
    """``n`` fresh job ids due now (this process's clock) plus ``delay_ms``: ``~``, the due time
    in ms in hex, ``.``, then the next ids of :data:`ids` (:mod:`fastlock.queues.ids`), written
    by ``core`` (by default the process's); :func:`fresh_id` for one."""
    return (core or default_core())._fresh(_prefix, _numbers, n, time.time(), delay_ms)


def fresh_id(core: Core, delay_ms: int = 0) -> str:
    """One fresh job id (:func:`fresh`'s), written by ``core``."""
    return core._fresh_id(_prefix, _numbers, time.time(), delay_ms)


def _start() -> None:
    """(Re)start the sources: at import, and in a forked child."""
    global ids, next_id, local, _prefix, _numbers
    _prefix, _numbers = f"{os.urandom(8).hex()}-", itertools.count()
    ids = map(f"{_prefix}%x".__mod__, _numbers)
    next_id = ids.__next__
    local = _ThreadTag()


_start()
os.register_at_fork(after_in_child=_start)
