"""``queue``, ``limiter``, ``locks``, ``lock`` and ``rwlock`` for every client, a mixin.
``aio/access.py`` is the source of the sync ``sync/access.py`` (``tools/async_to_sync.py``
writes it)."""

from __future__ import annotations

import functools
from typing import Any, Unpack

from ..limits.base import LimiterOptions
from ..locks.options import LockOptions
from ..locks.readwrite import RWLockOptions
from ..queues.base import QueueOptions

if True:  # ASYNC
    from .limiter import AsyncLimiter
    from .locks import AsyncLock, AsyncLockManager
    from .queue import AsyncQueue
    from .rwlock import AsyncRWLock
else:  # used once the names are the sync ones
    from ..limits.limiter import Limiter  # noqa: F401
    from ..locks.lock import Lock  # noqa: F401
    from ..locks.manager import LockManager  # noqa: F401
    from ..locks.rwlock import RWLock  # noqa: F401
    from ..queues.queue import Queue  # noqa: F401

__all__ = ["AsyncLockQueueAccess"]


class AsyncLockQueueAccess:
    """``queue``, ``limiter``, ``locks``, ``lock`` and ``rwlock`` for any
    :class:`~fastlock.operations.AsyncRunner` (the standalone, cluster and sentinel clients)."""

    def queue(self, name: str, **options: Unpack[QueueOptions]) -> AsyncQueue:
        """A job queue on this client: ``options`` go to :class:`~fastlock.aio.AsyncQueue`
        (``lease``, ``max_attempts``, ``backoff``, ``keep_completed``, ``digester``, ``prefix``, ``rate``;
        typed by :class:`~fastlock.queues.base.QueueOptions`, each checked before use)."""
        return AsyncQueue(self, name, **options)  # type: ignore[arg-type] # a mixin of runners

    def limiter(self, name: str, *, rate: int = 100, **options: Unpack[LimiterOptions]) -> AsyncLimiter:
        """A rate limiter on this client: ``rate`` admissions per ``per`` seconds (default 1),
        ``kind`` ``"gcra"`` (default; ``burst``, default ``rate``) or ``"window"``, ``prefix``
        (see :class:`~fastlock.limits.base.LimiterBase`; each option checked before use)."""
        return AsyncLimiter(self, name, rate=rate, **options)  # type: ignore[arg-type] # a mixin of runners

    @functools.cached_property
    def locks(self) -> AsyncLockManager:
        """The default lock namespace (prefix ``fastlock``, shared by every client); build a
        :class:`~fastlock.aio.AsyncLockManager` for other settings."""
        return AsyncLockManager(self)  # type: ignore[arg-type] # a mixin of runners

    def lock(
        self,
        name: str | None = None,
        *,
        digest: str | None = None,
        queue: str | None = None,
        args: Any = None,
        **options: Unpack[LockOptions],
    ) -> AsyncLock:
        """A unique-job lock in :attr:`locks` (see :meth:`LockManager.lock
        <fastlock.LockManager.lock>`); ``options`` (``type``, ``ttl``, ``timeout``, ``limit``,
        ``job_id``, ``on_conflict``) are typed by :class:`~fastlock.locks.options.LockOptions`
        and each checked before use."""
        return self.locks.lock(name, digest=digest, queue=queue, args=args, **options)

    def rwlock(self, name: str, **options: Unpack[RWLockOptions]) -> AsyncRWLock:
        """A read-write lock on this client (many readers or one writer, writer preference):
        ``ttl`` (required: seconds, or ``None``), ``timeout`` (default 0), ``prefix`` (default
        ``"fl"``); see :class:`~fastlock.locks.readwrite.RWLockBase`, each option checked before use."""
        return AsyncRWLock(self, name, **options)  # type: ignore[arg-type] # a mixin of runners
