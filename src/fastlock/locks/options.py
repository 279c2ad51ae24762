""":class:`LockOptions`: the keyword options of a lock, typed once for every entry point
(:class:`~fastlock.locks.lock.Lock`, :meth:`LockManager.lock <fastlock.LockManager.lock>`,
:meth:`Client.lock <fastlock.Client.lock>`), so ``mypy --strict`` checks each option's name
and type wherever a lock is built. The values are checked again at run time by ``Lock``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Required, TypedDict

from .conflict import StrategySpec
from .types import LockType

__all__ = ["LOCK_KEYWORDS", "LOCK_OPTIONS", "LockOptions", "RenewOption"]


class RenewOption(TypedDict, total=False):
    """``renew``: keep a held lock alive while its holder runs (:mod:`fastlock.locks.renewal`);
    part of :class:`LockOptions`, and the managers' ``lock`` takes it as its one extra keyword."""

    renew: bool


class LockOptions(RenewOption, total=False):
    """``type`` (a :class:`LockType` or its name/alias), ``ttl`` and ``timeout`` (seconds),
    ``limit`` (concurrent holders), ``job_id`` (the default holder), ``on_conflict`` (a
    strategy, its name, or one per side): see :class:`~fastlock.locks.lock.Lock`. ``ttl`` is
    required: seconds, or ``None`` for a lock that never expires (``docs/locks.md``).
    ``renew=True`` keeps a held lock alive while its holder runs (the client's lock watchdog,
    :mod:`fastlock.locks.renewal`; the manager builds a ``RenewingLock`` then)."""

    type: str | LockType
    ttl: Required[float | None]
    timeout: float
    limit: int
    job_id: str | None
    on_conflict: StrategySpec | Mapping[str, StrategySpec]


LOCK_OPTIONS = frozenset(LockOptions.__required_keys__ | LockOptions.__optional_keys__)
"""The names of :class:`LockOptions` (the keywords of ``Lock``, beside ``name``)."""

LOCK_KEYWORDS = LOCK_OPTIONS | {"name", "digest", "queue", "args"}
"""The keywords of ``client.lock`` and ``LockManager.lock``: what the lock is on, and the options."""
