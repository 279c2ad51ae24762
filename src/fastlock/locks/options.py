""":class:`LockOptions`: the keyword options of a lock, typed once for every entry point
(:class:`~fastlock.locks.lock.Lock`, :meth:`LockManager.lock <fastlock.LockManager.lock>`,
:meth:`Client.lock <fastlock.Client.lock>`), so ``mypy --strict`` checks each option's name
and type wherever a lock is built. The values are checked again at run time by ``Lock``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Required, TypedDict

from .conflict import StrategySpec
from .types import LockType

__all__ = ["LockOptions"]


class LockOptions(TypedDict, total=False):
    """``type`` (a :class:`LockType` or its name/alias), ``ttl`` and ``timeout`` (seconds),
    ``limit`` (concurrent holders), ``job_id`` (the default holder), ``on_conflict`` (a
    strategy, its name, or one per side): see :class:`~fastlock.locks.lock.Lock`. ``ttl`` is
    required: seconds, or ``None`` for a lock that never expires (``docs/locks.md``)."""

    type: str | LockType
    ttl: Required[float | None]
    timeout: float
    limit: int
    job_id: str | None
    on_conflict: StrategySpec | Mapping[str, StrategySpec]
