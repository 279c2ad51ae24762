# generated from src/fastlock/aio/access.py by tools/async_to_sync.py, do not edit
"""``queue``, ``limiter``, ``locks``, ``lock`` and ``rwlock`` for every client, a mixin.
``aio/access.py`` is the source of the sync ``sync/access.py`` (``tools/async_to_sync.py``
writes it)."""

from __future__ import annotations

import functools
from typing import Any, Unpack

from ..limits.base import LimiterOptions
from ..limits.limiter import Limiter
from ..locks.lock import Lock
from ..locks.manager import LockManager
from ..locks.options import LockOptions
from ..locks.readwrite import RWLockOptions
from ..locks.rwlock import RWLock
from ..queues.base import QueueOptions
from ..queues.queue import Queue

__all__ = ["LockQueueAccess"]


class LockQueueAccess:
    """``queue``, ``limiter``, ``locks``, ``lock`` and ``rwlock`` for any
    :class:`~fastlock.operations.Runner` (the standalone, cluster and sentinel clients)."""

    def queue(self, name: str, **options: Unpack[QueueOptions]) -> Queue:
        """A job queue on this client: ``options`` go to :class:`~fastlock.queues.queue.Queue`
        (``lease``, ``max_attempts``, ``backoff``, ``keep_completed``, ``digester``, ``prefix``, ``rate``;
        typed by :class:`~fastlock.queues.base.QueueOptions`, each checked before use)."""
        return Queue(self, name, **options)  # type: ignore[arg-type] # a mixin of runners

    def limiter(self, name: str, *, rate: int = 100, **options: Unpack[LimiterOptions]) -> Limiter:
        """A rate limiter on this client: ``rate`` admissions per ``per`` seconds (default 1),
        ``kind`` ``"gcra"`` (default; ``burst``, default ``rate``) or ``"window"``, ``prefix``
        (see :class:`~fastlock.limits.base.LimiterBase`; each option checked before use)."""
        return Limiter(self, name, rate=rate, **options)  # type: ignore[arg-type] # a mixin of runners

    @functools.cached_property
    def locks(self) -> LockManager:
        """The default lock namespace (prefix ``fastlock``, shared by every client); build a
        :class:`~fastlock.LockManager` for other settings."""
        return LockManager(self)  # type: ignore[arg-type] # a mixin of runners

    def lock(
        self,
        name: str | None = None,
        *,
        digest: str | None = None,
        queue: str | None = None,
        args: Any = None,
        **options: Unpack[LockOptions],
    ) -> Lock:
        """A unique-job lock in :attr:`locks` (see :meth:`LockManager.lock
        <fastlock.LockManager.lock>`); ``options`` (``type``, ``ttl``, ``timeout``, ``limit``,
        ``job_id``, ``on_conflict``) are typed by :class:`~fastlock.locks.options.LockOptions`
        and each checked before use."""
        return self.locks.lock(name, digest=digest, queue=queue, args=args, **options)

    def rwlock(self, name: str, **options: Unpack[RWLockOptions]) -> RWLock:
        """A read-write lock on this client (many readers or one writer, writer preference):
        ``ttl`` (required: seconds, or ``None``), ``timeout`` (default 0), ``prefix`` (default
        ``"fl"``); see :class:`~fastlock.locks.readwrite.RWLockBase`, each option checked before use."""
        return RWLock(self, name, **options)  # type: ignore[arg-type] # a mixin of runners
