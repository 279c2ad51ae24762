"""The reaper: removes orphaned locks in bounded batches, one runner at a time.

**Alive.** A holder is alive while its slot exists, i.e. while its lease runs: a slot with
a ttl is removed by the server when the ttl runs out (a live holder keeps it by calling
:meth:`Lock.extend <fastlock.Lock.extend>`, its heartbeat), and a slot without one lives
until released. A job framework that knows more (the job is neither queued, scheduled,
retrying nor running) passes ``alive(entry, job_id) -> bool``; only a holder it declares
dead is removed, and only the very acquisition that was judged (compare-and-delete on its
fencing token), so a job that re-acquired meanwhile keeps its lock.

Without ``alive`` the reaper deletes no lock at all: it drops tracking-index entries whose
slots are gone (expired ttl locks, until_expired locks), which is what keeps the index from
growing. Each pass examines at most ``batch`` index entries (in scripts of at most
``chunk``) and holds the reaper lock (``fastlock:reaper``, with ``lease``) meanwhile, so a
second runner skips its pass instead of racing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..protocol.arguments import duration_ms
from .lock import parse_slot, unexpected_reply
from .manager import LockEntry

if TYPE_CHECKING:
    from .lock import Scope
    from .manager import LockManager

__all__ = ["ReapResult", "Reaper"]

logger = logging.getLogger("fastlock.reaper")

Alive = Callable[[LockEntry, str], bool]


@dataclass(frozen=True)
class ReapResult:
    """One pass: index entries examined, stale entries dropped, dead holders released."""

    examined: int
    dropped: int
    released: int


def _live(
    reply: list[Any], by_scope: dict[bytes, tuple[LockEntry, Scope]]
) -> Iterator[tuple[LockEntry, Scope, list[tuple[int, str]]]]:
    """The live entries of a ``lock_reap`` reply ``[dropped, (scope, n, value * n)...]``:
    each entry, its scope and its holders' ``(token, job id)``."""
    i = 1
    while i < len(reply):
        found = by_scope.get(reply[i]) if type(reply[i]) is bytes else None
        count = reply[i + 1] if i + 1 < len(reply) else None
        if found is None or type(count) is not int or not 0 < count <= len(reply) - i - 2:
            raise unexpected_reply("lock_reap", reply)
        yield *found, [parse_slot(value, "lock_reap") for value in reply[i + 2 : i + 2 + count]]
        i += 2 + count


class Reaper:
    """Reaps one lock namespace: ``run_once()`` for one bounded pass, ``start()`` for a
    background thread passing every ``interval`` seconds (``stop()`` ends it)."""

    def __init__(
        self,
        manager: LockManager,
        *,
        batch: int = 1000,
        chunk: int = 100,
        interval: float = 600.0,
        lease: float = 60.0,
        alive: Alive | None = None,
    ) -> None:
        if batch < 1 or chunk < 1:
            raise ValueError("batch and chunk must be >= 1")
        duration_ms(interval, "interval")
        self.manager = manager
        self.batch = batch
        self.chunk = chunk
        self.interval = interval
        self.alive = alive
        # holder: this object in the calling thread and process (a Reaper forked along is another runner)
        self._mutex = manager.lock("fastlock:reaper", ttl=lease)
        self._cursor = (0, "")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> ReapResult | None:
        """One pass from where the last one stopped, or ``None`` if another runner holds the
        reaper lock. A pass stops after ``batch`` entries or one full sweep of the buckets."""
        if self._mutex.acquire(blocking=False) is None:
            return None
        try:
            return self._pass()
        finally:
            self._mutex.release()

    def _pass(self) -> ReapResult:
        manager = self.manager
        bucket, after = self._cursor
        examined = dropped = released = visited = 0
        while examined < self.batch and visited < manager.buckets:
            want = min(self.chunk, self.batch - examined)
            page = manager.page(bucket, after, want)
            if page:
                after = page[-1].member
                entries = [entry for entry in page if entry.digest != self._mutex.digest]
                gone, freed = self._reap(bucket, entries) if entries else (0, 0)
                examined, dropped, released = examined + len(entries), dropped + gone, released + freed
            if len(page) < want:
                bucket, after, visited = (bucket + 1) % manager.buckets, "", visited + 1
        self._cursor = (bucket, after)
        return ReapResult(examined, dropped, released)

    def _reap(self, bucket: int, entries: list[LockEntry]) -> tuple[int, int]:
        manager = self.manager
        keys: list[str] = list(manager.bucket_keys(bucket))
        args: list[Any] = [manager.max_history]
        by_scope = {}
        for entry in entries:
            scope = manager.entry_scope(entry)
            by_scope[scope.name.encode()] = (entry, scope)
            keys += scope.slots
            args += [scope.name, entry.limit]
        reply = manager.run("lock_reap", keys, args)
        if type(reply) is not list or not reply or type(reply[0]) is not int:
            raise unexpected_reply("lock_reap", reply)
        alive = self.alive
        if alive is None:
            return reply[0], 0
        released = 0
        for entry, scope, held in _live(reply, by_scope):
            for token, job_id in held:
                if not alive(entry, job_id) and manager.release_scope(scope, job_id, token):
                    logger.info("reaped lock %s of dead job %s (token %s)", scope.name, job_id, token)
                    released += 1
        return reply[0], released

    def start(self) -> threading.Thread:
        """Run a pass now and every ``interval`` seconds in a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("this reaper is already running")
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
