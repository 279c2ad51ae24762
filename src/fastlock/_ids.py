"""Fork-safe identities: ids no other process, thread or earlier fork repeats.

``next_id()`` is a random 64-bit prefix drawn per process (16 hex digits), ``-``, then a
counter in hex; ``ids`` is the same source as an iterator, and ``take(n, mark)`` its next
``n`` ids, each after ``mark`` (written by the core's ``_numbered``).
``local.tag`` is the calling thread's own id plus ``-``: unique per thread
of this process (a new thread never inherits a dead one's). A forked child starts both
afresh, so nothing built before ``fork()`` gives the child an identity of its parent.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator

from ._impl import Core, default_core

__all__ = ["ids", "local", "next_id", "take"]


class _ThreadTag(threading.local):
    tag: str

    def __init__(self) -> None:
        self.tag = next_id() + "-"


ids: Iterator[str]
next_id: Callable[[], str]
local: _ThreadTag
_prefix: str  # this process's random prefix and its "-"
_numbers: Iterator[int]  # the counter after it, shared by ids and take


def take(n: int, mark: str = "", core: Core | None = None) -> list[str]:
    """The next ``n`` ids of :data:`ids`, each after ``mark`` (written by ``core``, by default
    the process's)."""
    return (core or default_core())._numbered(mark + _prefix, _numbers, n)


def _start() -> None:
    """(Re)start the sources: at import, and in a forked child."""
    global ids, next_id, local, _prefix, _numbers
    _prefix, _numbers = f"{os.urandom(8).hex()}-", itertools.count()
    ids = map(f"{_prefix}%x".__mod__, _numbers)
    next_id = ids.__next__
    local = _ThreadTag()


_start()
os.register_at_fork(after_in_child=_start)
