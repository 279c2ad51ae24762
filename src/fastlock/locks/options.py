""":class:`LockOptions`: the keyword options of a lock, declared once for every entry point
(:meth:`LockManager.lock <fastlock.LockManager.lock>`, :meth:`Client.lock <fastlock.Client.lock>`,
their asyncio twins, the contrib integrations: ``**options: Unpack[LockOptions]``), so
``mypy --strict`` checks each option's name and type wherever a lock is built. At run time
:func:`check_options` refuses an unknown name before anything is sent, and ``LockBase``
checks the values (its keyword parameters hold the defaults)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Required, TypedDict

from ..exceptions import ArgumentError
from .conflict import StrategySpec
from .types import LockType

__all__ = ["OPTION_NAMES", "LockOptions", "check_options"]


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


OPTION_NAMES = LockOptions.__required_keys__ | LockOptions.__optional_keys__


def check_options(options: Mapping[str, object]) -> None:
    """Raise ``ArgumentError`` naming the first option of ``options`` a lock does not take
    (and the known one it is closest to)."""
    for name in options:
        if name not in OPTION_NAMES:
            close = difflib.get_close_matches(str(name), OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]}=?" if close else ""
            known = ", ".join(sorted(OPTION_NAMES))
            raise ArgumentError(f"unknown lock option {name!r}{hint} (known: {known})")
