# generated from src/fastlock/aio/access.py by tools/async_to_sync.py, do not edit
"""``queue``, ``locks`` and ``lock`` for every client, a mixin. ``aio/access.py`` is the source
of the sync ``sync/access.py`` (``tools/async_to_sync.py`` writes it)."""

from __future__ import annotations

import functools
from typing import Any, Unpack

from ..locks.lock import Lock
from ..locks.manager import LockManager
from ..locks.options import LockOptions
from ..queues.base import QueueOptions
from ..queues.queue import Queue

__all__ = ["LockQueueAccess"]


class LockQueueAccess:
    """``queue``, ``locks`` and ``lock`` for any :class:`~fastlock.operations.Runner` (the
    standalone, cluster and sentinel clients)."""

    def queue(self, name: str, **options: Unpack[QueueOptions]) -> Queue:
        """A job queue on this client: ``options`` go to :class:`~fastlock.queues.queue.Queue`
        (``lease``, ``max_attempts``, ``backoff``, ``keep_completed``, ``digester``, ``prefix``;
        typed by :class:`~fastlock.queues.base.QueueOptions`, each checked before use)."""
        return Queue(self, name, **options)  # type: ignore[arg-type] # a mixin of runners

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
