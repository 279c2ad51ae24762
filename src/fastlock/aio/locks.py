"""Locks on asyncio: :class:`AsyncLock` (``aio/lock.py``), :class:`AsyncLockManager`
(``aio/manager.py``) and :class:`AsyncReaper` (``aio/reaper.py``), thin shells over the same
lock logic as the blocking ones (:mod:`fastlock.locks.base`, the admin operations of
:mod:`fastlock.locks.admin`, the reaper's pass); ``locks/lock.py`` and ``locks/manager.py``
are generated from the first two (``tools/async_to_sync.py``). This module keeps the
import path ``fastlock.aio.locks``.
"""

from __future__ import annotations

from .lock import AsyncLock
from .manager import AsyncLockManager
from .reaper import AsyncReaper

__all__ = ["AsyncLock", "AsyncLockManager", "AsyncReaper"]
