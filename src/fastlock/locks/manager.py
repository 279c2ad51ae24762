# generated from src/fastlock/aio/manager.py by tools/async_to_sync.py, do not edit
"""``LockManager``: a lock namespace (key layout in :mod:`fastlock.locks.keys`, options),
its locks, its reaper and its admin (the operations of :mod:`fastlock.locks.admin`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Unpack

from ..locks import admin
from ..locks.base import NewLock, lock_builder
from ..locks.conflict import StrategySpec
from ..locks.keys import ChangelogEntry, LockEntry, Scope
from ..locks.namespace import Namespace
from ..locks.options import RenewOption
from ..locks.renewal import lock_class
from ..locks.types import TTL_REQUIRED, Holder, LockType
from ..operations import Runner
from .lock import Lock
from .notify import ThreadSignal
from .reaper import Reaper
from .renewing import RenewingLock

__all__ = ["LockManager"]


class LockManager(Namespace[Runner]):
    """A lock namespace on one client (any :class:`~fastlock.operations.Runner`).

    ``prefix`` and ``buckets`` fix the key layout (every process of a deployment must use
    the same ones); ``hash`` the digest function (:mod:`fastlock.digest`). ``track`` keeps
    the per-bucket index that admin and the reaper walk (one ZADD per first holder, one
    ZREM per last release); ``fencing`` hands out tokens from the per-bucket counter (one
    INCR per acquire; off, every token is 1); ``patience`` (seconds, default
    :data:`~fastlock.locks.namespace.PATIENCE`) is how long a queued waiter lets running callers
    take a freed lock before a release hands the lock to it; ``fair`` makes its locks first
    come, first served: a release hands the lock over at once and an acquire that finds a slot
    free still queues behind a live waiter already queued (``docs/locks.md``, "Hand-over and
    fairness"); ``max_history`` > 0 writes a per-bucket
    changelog stream of that length (one XADD per transition). ``strategies`` adds or
    replaces conflict strategies by name (:mod:`fastlock.locks.conflict`; on asyncio the
    ``replace`` strategy awaits its steps: :data:`~fastlock.locks.conflict.ASYNC_STRATEGIES`).
    ``local_queue`` queues this manager's waiters for one lock in-process (by the same
    ``patience`` rule), so that only as many as the lock has holders contend at the server at a
    time (:mod:`fastlock.locks.gate`; ``docs/locks.md``, "Waiting in turn": on by default, for
    tasks and threads alike, as measured there).
    At its first use the manager reads the server's ``maxmemory-policy``: ``allkeys-*`` is
    refused (``LockError``).
    """

    signal_type = ThreadSignal

    # --- locks ------------------------------------------------------------------------

    def lock(
        self,
        name: str | None = None,
        *,
        digest: str | None = None,
        queue: str | None = None,
        args: Any = None,
        type: str | LockType = LockType.UNTIL_EXECUTED,  # noqa: A002 - the public keyword is type=
        ttl: float | None = TTL_REQUIRED,
        timeout: float = 0.0,
        limit: int = 1,
        job_id: str | None = None,
        on_conflict: StrategySpec | Mapping[str, StrategySpec] = None,
        **more: Unpack[RenewOption],
    ) -> Lock:
        """A lock on ``digest``, or on the digest of (``name``, ``queue``, ``args``); the other
        options are :class:`Lock`'s (checked there; the common ones by the Cython core, which
        builds the same lock without the class call: :func:`~fastlock.locks.base.lock_builder`).
        ``renew=True`` builds a renewing lock (:class:`RenewingLock`), kept alive while held.
        Any other keyword raises :class:`~fastlock.UnknownOptionError`, before anything is sent.
        From the second call on, the Cython core's twin of this method answers, its keywords read
        in C (:meth:`_bind_new_lock`)."""
        cls = lock_class(more, ttl, Lock, RenewingLock) if more else Lock  # renew, or unknown
        digest = self.lock_digest(name, digest, queue, args)
        new: NewLock = self._new_lock or self._bind_new_lock()
        return new(cls, self, digest, name, type, ttl, timeout, limit, job_id, on_conflict)

    def _bind_new_lock(self) -> NewLock:
        """Bind how this manager builds locks: its core's (its client's) lock builder, and, unless
        a subclass overrides :meth:`lock`, the core's twin of :meth:`lock` where it has one (the
        Cython core's reads the same keywords in C and builds a common call's lock without a
        Python frame: ``_coreparts/domain_new.pxi``). Set as an attribute: ``vars(self)`` would
        make the manager a ``__dict__``, slowing the attribute loads of every lock operation
        (+900 instructions an acquire and release)."""
        self._new_lock = new = lock_builder(self.core)
        if type(self).lock is LockManager.lock:
            lock = self.core._manager_lock(self, LockManager.lock, Lock, self.digester.constructor)
            if lock is not None:
                self.lock = lock  # type: ignore[method-assign]
        return new

    def reaper(self, **options: Any) -> Reaper:
        """A :class:`~fastlock.locks.reaper.Reaper` for this namespace (options: see there)."""
        return Reaper(self, **options)

    # --- key layout -------------------------------------------------------------------

    def entry_scope(self, entry: LockEntry) -> Scope:
        """The keys of a tracked scope."""
        return self.runner.run(admin.entry_scope(self, entry))

    # --- admin (bounded per call) -----------------------------------------------------

    def scan(
        self, cursor: str = "0", *, match: str | None = None, count: int = 100
    ) -> tuple[str, list[LockEntry]]:
        """One page of tracked lock scopes: ``(next_cursor, entries)``; ``"0"`` ends the walk.

        ``match`` is a glob on the scope (``<digest>`` or ``<digest>:run``). A call reads at
        most ``count`` index entries from at most 256 buckets, so a page may be short or
        empty. Entries present for the whole walk are returned exactly once."""
        return self.runner.run(admin.scan(self, cursor, match, count))

    def page(self, bucket: int, after: str, count: int) -> list[LockEntry]:
        """Up to ``count`` index entries of ``bucket`` after member ``after`` ("": from the start)."""
        return self.runner.run(admin.page(self, bucket, after, count))

    def entries(self, *, match: str | None = None, count: int = 100) -> Iterator[LockEntry]:
        """Every tracked lock scope, page by page (each page a bounded :meth:`scan`)."""
        cursor = "0"
        while True:
            cursor, found = self.scan(cursor, match=match, count=count)
            yield from found
            if cursor == "0":
                return

    def limit_of(self, digest: str, runtime: bool = False) -> int | None:
        """The limit recorded in the index for a tracked scope (``None``: not tracked)."""
        return self.runner.run(admin.limit_of(self, digest, runtime))

    def inspect(self, digest: str, *, runtime: bool = False, limit: int | None = None) -> list[Holder]:
        """Holders of a digest's scope; ``limit`` defaults to the one tracked (else 1)."""
        return self.runner.run(admin.inspect(self, digest, runtime, limit))

    def delete(self, digest: str, *, limit: int | None = None) -> int:
        """Delete a digest's locks (both scopes) whoever holds them; wakes their waiters.
        Returns the number of holders removed. ``limit`` defaults to the tracked one (else 1)."""
        return self.runner.run(admin.delete(self, digest, limit))

    def delete_matching(self, match: str, cursor: str = "0", *, count: int = 100) -> tuple[str, int]:
        """Delete the tracked scopes whose name matches the glob ``match``, one bounded page
        per call: ``(next_cursor, holders removed)``; call again until the cursor is ``"0"``."""
        return self.runner.run(admin.delete_matching(self, match, cursor, count))

    def changelog(self, digest: str, *, count: int = 100) -> list[ChangelogEntry]:
        """The digest's changelog entries, newest first, among the newest ``count`` entries of
        its bucket's stream (empty unless ``max_history`` > 0)."""
        return self.runner.run(admin.changelog(self, digest, count))

    def __repr__(self) -> str:
        return f"<fastlock.LockManager prefix={self.prefix!r} buckets={self.buckets}>"
