"""``queue``, ``locks`` and ``lock`` for every client, a mixin. ``aio/access.py`` is the source
of the sync ``sync/access.py`` (``tools/async_to_sync.py`` writes it)."""

from __future__ import annotations

import functools
from typing import Any, Unpack

from ..locks.options import LockOptions
from ..queues.base import QueueOptions

if True:  # ASYNC
    from .locks import AsyncLock, AsyncLockManager
    from .queue import AsyncQueue
else:  # used once the names are the sync ones
    from ..locks.lock import Lock  # noqa: F401
    from ..locks.manager import LockManager  # noqa: F401
    from ..queues.queue import Queue  # noqa: F401

__all__ = ["AsyncLockQueueAccess"]


class AsyncLockQueueAccess:
    """``queue``, ``locks`` and ``lock`` for any :class:`~fastlock.operations.AsyncRunner` (the
    standalone, cluster and sentinel clients)."""

    def queue(self, name: str, **options: Unpack[QueueOptions]) -> AsyncQueue:
        """A job queue on this client: ``options`` go to :class:`~fastlock.aio.AsyncQueue`
        (``lease``, ``max_attempts``, ``backoff``, ``keep_completed``, ``digester``, ``prefix``;
        typed by :class:`~fastlock.queues.base.QueueOptions`, each checked before use)."""
        return AsyncQueue(self, name, **options)  # type: ignore[arg-type] # a mixin of runners

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
