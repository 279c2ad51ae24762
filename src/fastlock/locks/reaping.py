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
second runner skips its pass instead of racing. :class:`ReaperBase` holds the pass (an
operation); :class:`~fastlock.locks.reaper.Reaper` runs it from a thread,
:class:`~fastlock.aio.AsyncReaper` from an asyncio task (both written from ``aio/reaper.py``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..exceptions import ArgumentError, ProtocolError
from ..operations import Call, Command, Commands, Operation, Runner
from ..protocol.arguments import duration_ms
from .admin import entry_scope, page
from .keys import LockEntry, Scope
from .namespace import Namespace
from .replies import reap_reply, unexpected_reply

if TYPE_CHECKING:
    from ..operations import AsyncRunner

__all__ = ["MUTEX", "RUNS_KEPT", "ReapResult", "ReaperBase", "ReaperRun", "runs_reply"]

R = TypeVar("R", bound="Runner | AsyncRunner")

logger = logging.getLogger("fastlock.reaper")

Alive = Callable[[LockEntry, str], bool]
MUTEX = "fastlock:reaper"  # the name of the reaper lock
RUNS_KEPT = 50
"""Passes the reaper's run log keeps (the newest), whichever process ran them."""


@dataclass(frozen=True)
class ReapResult:
    """One pass: index entries examined, stale entries dropped, dead holders released."""

    examined: int
    dropped: int
    released: int


@dataclass(frozen=True)
class ReaperRun:
    """One logged pass: when it ended (``at``, s since the epoch, the runner's clock), how long
    it took, what it did, and which process ran it (``host:pid``)."""

    at: float
    seconds: float
    examined: int
    dropped: int
    released: int
    runner: str


def runs_reply(reply: Any) -> list[ReaperRun]:
    """The passes of ``LRANGE`` over the run log, newest first."""
    try:
        return [ReaperRun(**json.loads(entry)) for entry in reply]
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"unexpected entry in the reaper's run log: {reply!r:.200}") from exc


class ReaperBase(Generic[R]):
    """What every transport's reaper shares: the options, the cursor and the pass, the
    operation :meth:`passing`, run between taking and releasing the reaper lock."""

    def __init__(
        self,
        manager: Namespace[R],
        *,
        batch: int = 1000,
        chunk: int = 100,
        interval: float = 600.0,
        lease: float = 60.0,
        alive: Alive | None = None,
    ) -> None:
        if batch < 1 or chunk < 1:
            raise ArgumentError("batch and chunk must be >= 1")
        duration_ms(interval, "interval")
        self.manager = manager
        self.batch = batch
        self.chunk = chunk
        self.interval = interval
        self.alive = alive
        self.lease = lease
        self.mutex_digest = manager.digester.digest(MUTEX, None, None)
        self.runs_key = manager.keys.scope(self.mutex_digest, "", 1).name_key(":runs")
        self._cursor = (0, "")

    def passing(self) -> Operation[ReapResult]:
        """One pass from the cursor (without the reaper lock), as an operation; it ends by
        logging itself (:data:`RUNS_KEPT` kept, in the reaper lock's slot)."""
        started, manager = time.monotonic(), self.manager
        bucket, after = self._cursor
        examined = dropped = released = visited = 0
        while examined < self.batch and visited < manager.buckets:
            want = min(self.chunk, self.batch - examined)
            found = yield from page(manager, bucket, after, want)
            if found:
                after = found[-1].member
                entries = [entry for entry in found if entry.digest != self.mutex_digest]
                gone, freed = (yield from self._reap(bucket, entries)) if entries else (0, 0)
                examined, dropped, released = examined + len(entries), dropped + gone, released + freed
            if len(found) < want:
                bucket, after, visited = (bucket + 1) % manager.buckets, "", visited + 1
        self._cursor = (bucket, after)
        run = ReaperRun(time.time(), round(time.monotonic() - started, 6), examined, dropped, released,
                        f"{socket.gethostname()}:{os.getpid()}")  # fmt: skip
        logged = json.dumps(dataclasses.asdict(run))
        yield Commands([("LPUSH", self.runs_key, logged), ("LTRIM", self.runs_key, 0, RUNS_KEPT - 1)])
        return ReapResult(examined, dropped, released)

    def reading_runs(self, count: int = RUNS_KEPT) -> Operation[list[ReaperRun]]:
        """The logged passes, newest first (at most ``count``), as an operation."""
        return runs_reply((yield Command(("LRANGE", self.runs_key, 0, max(0, count - 1)))))

    def _reap(self, bucket: int, entries: list[LockEntry]) -> Operation[tuple[int, int]]:
        manager = self.manager
        keys: list[str] = list(manager.keys.bucket_keys(bucket))
        args: list[Any] = [manager.max_history]
        by_scope: dict[bytes, tuple[LockEntry, Scope]] = {}
        for entry in entries:
            scope = yield from entry_scope(manager, entry)
            by_scope[scope.name.encode()] = (entry, scope)
            keys += scope.slots
            args += [scope.name, entry.limit]
        reply = yield Call("lock_reap", keys, args)
        dropped, live = reap_reply(reply)
        alive = self.alive
        if alive is None:
            return dropped, 0
        released = 0
        for name, held in live:
            if name not in by_scope:
                raise unexpected_reply("lock_reap", reply)
            entry, scope = by_scope[name]
            for token, job_id in held:
                if not alive(entry, job_id) and (yield from manager.releasing(scope, job_id, token)):
                    logger.info("reaped lock %s of dead job %s (token %s)", scope.name, job_id, token)
                    released += 1
        return dropped, released
