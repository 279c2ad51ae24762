# generated from src/fastlock/aio/reaper.py by tools/async_to_sync.py, do not edit
"""The reaper shell: the pass of :class:`~fastlock.locks.reaping.ReaperBase` run under the
reaper lock, once or every ``interval`` seconds in the background (an asyncio task; a thread on
the blocking side). ``aio/reaper.py`` is the source of ``locks/reaper.py``."""

from __future__ import annotations

import logging
import threading
from typing import Any

from ..exceptions import UsageError
from ..locks.lock import Lock
from ..locks.namespace import Namespace
from ..locks.reaping import MUTEX, RUNS_KEPT, ReaperBase, ReaperRun, ReapResult
from ..operations import Runner

__all__ = ["Reaper"]

logger = logging.getLogger("fastlock.reaper")


class Reaper(ReaperBase[Runner]):
    """Reaps one lock namespace: ``run_once()`` for one bounded pass, ``start()`` for a
    background runner passing every ``interval`` seconds (``stop()`` ends it)."""

    def __init__(self, manager: Namespace[Runner], **options: Any) -> None:
        super().__init__(manager, **options)
        # holder: this object in the calling thread and process (a Reaper forked along is another runner)
        self._mutex = Lock(manager, self.mutex_digest, name=MUTEX, ttl=self.lease)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> ReapResult | None:
        """One pass from where the last one stopped, or ``None`` if another runner holds the
        reaper lock. A pass stops after ``batch`` entries or one full sweep of the buckets."""
        if self._mutex.acquire(blocking=False) is None:
            return None
        try:
            return self.manager.runner.run(self.passing())
        finally:
            self._mutex.release()

    def runs(self, count: int = RUNS_KEPT) -> list[ReaperRun]:
        """The last passes of this namespace's reapers (every process's; newest first, at most
        ``count`` of the :data:`~fastlock.locks.reaping.RUNS_KEPT` logged)."""
        return self.manager.runner.run(self.reading_runs(count))

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

    def _loop(self) -> None:
        while True:
            try:
                self.run_once()
            except Exception:
                logger.exception("reaper pass failed")
            if self._stop.wait(self.interval):
                return
