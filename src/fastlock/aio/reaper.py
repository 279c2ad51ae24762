"""``AsyncReaper``: the reaper's pass (:class:`~fastlock.locks.reaper.ReaperBase`) on asyncio."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from .. import _ids
from ..exceptions import UsageError
from ..locks.namespace import Namespace
from ..locks.reaper import MUTEX, ReaperBase, ReapResult
from ..operations import AsyncRunner
from .lock import AsyncLock

__all__ = ["AsyncReaper"]

logger = logging.getLogger("fastlock.reaper")


class AsyncReaper(ReaperBase[AsyncRunner]):
    """:class:`~fastlock.locks.reaper.Reaper` on asyncio: ``await run_once()`` for one pass,
    ``start()`` for a task passing every ``interval`` seconds (``await stop()`` ends it)."""

    def __init__(self, manager: Namespace[AsyncRunner], **options: Any) -> None:
        super().__init__(manager, **options)
        job_id = f"reaper-{_ids.next_id()}"  # one holder, whichever task runs the pass
        self._mutex = AsyncLock(manager, self.mutex_digest, name=MUTEX, ttl=self.lease, job_id=job_id)
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> ReapResult | None:
        """One pass from where the last one stopped, or ``None`` if another runner holds the
        reaper lock."""
        if await self._mutex.acquire(blocking=False) is None:
            return None
        try:
            return await self.manager.runner.run(self.passing())
        finally:
            await self._mutex.release()

    def start(self) -> asyncio.Task[None]:
        """Run a pass now and every ``interval`` seconds in a task."""
        if self._task is not None and not self._task.done():
            raise UsageError("this reaper is already running")
        self._task = asyncio.create_task(self._loop(), name="fastlock-reaper")
        return self._task

    async def stop(self) -> None:
        """Stop the task (a pass under way is cancelled; its reaper lock expires after ``lease``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                logger.exception("reaper pass failed")
            await asyncio.sleep(self.interval)
