"""The reaper shell: the pass of :class:`~fastlock.locks.reaping.ReaperBase` run under the
reaper lock, once or every ``interval`` seconds in the background (an asyncio task; a thread on
the blocking side). ``aio/reaper.py`` is the source of ``locks/reaper.py``."""

from __future__ import annotations

import logging
from typing import Any

from ..exceptions import UsageError
from ..locks.namespace import Namespace
from ..locks.reaping import MUTEX, RUNS_KEPT, ReaperBase, ReaperRun, ReapResult
from ..operations import AsyncRunner

if True:  # ASYNC
    import asyncio
    import contextlib

    from .. import _ids
    from .lock import AsyncLock
else:
    import threading

    from ..locks.lock import Lock

__all__ = ["AsyncReaper"]

logger = logging.getLogger("fastlock.reaper")


class AsyncReaper(ReaperBase[AsyncRunner]):
    """Reaps one lock namespace: ``await run_once()`` for one bounded pass, ``start()`` for a
    background runner passing every ``interval`` seconds (``await stop()`` ends it)."""

    def __init__(self, manager: Namespace[AsyncRunner], **options: Any) -> None:
        super().__init__(manager, **options)
        if True:  # ASYNC
            job_id = f"reaper-{_ids.next_id()}"  # one holder, whichever task runs the pass
            self._mutex = AsyncLock(manager, self.mutex_digest, name=MUTEX, ttl=self.lease, job_id=job_id)
            self._task: asyncio.Task[None] | None = None
        else:
            # holder: this object in the calling thread and process (a Reaper forked along is another runner)
            self._mutex = Lock(manager, self.mutex_digest, name=MUTEX, ttl=self.lease)
            self._stop = threading.Event()
            self._thread: threading.Thread | None = None

    async def run_once(self) -> ReapResult | None:
        """One pass from where the last one stopped, or ``None`` if another runner holds the
        reaper lock. A pass stops after ``batch`` entries or one full sweep of the buckets."""
        if await self._mutex.acquire(blocking=False) is None:
            return None
        try:
            return await self.manager.runner.run(self.passing())
        finally:
            await self._mutex.release()

    async def runs(self, count: int = RUNS_KEPT) -> list[ReaperRun]:
        """The last passes of this namespace's reapers (every process's; newest first, at most
        ``count`` of the :data:`~fastlock.locks.reaping.RUNS_KEPT` logged)."""
        return await self.manager.runner.run(self.reading_runs(count))

    if True:  # ASYNC

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

    else:

        def start(self) -> threading.Thread:
            """Run a pass now and every ``interval`` seconds in a daemon thread."""
            if self._thread is not None and self._thread.is_alive():
                raise UsageError("this reaper is already running")
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="fastlock-reaper", daemon=True)
            self._thread.start()
            return self._thread

        def stop(self, timeout: float | None = None) -> None:
            """Stop the background thread (after its current pass)."""
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout)

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception:
                logger.exception("reaper pass failed")
            if True:  # ASYNC
                await asyncio.sleep(self.interval)
            else:
                if self._stop.wait(self.interval):
                    return
