# generated from src/fastlock/aio/rwlock.py by tools/async_to_sync.py, do not edit
"""Read-write locks: :class:`RWLock`, its :attr:`~RWLock.read` and
:attr:`~RWLock.write` sides (:class:`RWSide`), thin over
:class:`~fastlock.locks.readwrite.RWLockBase` (semantics: ``docs/locks.md``, "Read-write
locks"). ``aio/rwlock.py`` is the source of the sync ``locks/rwlock.py``:
``tools/async_to_sync.py`` writes it."""

from __future__ import annotations

from typing import Unpack

from ..exceptions import ConnectionError, LockConflictError, LockNotOwnedError, ResponseError
from ..locks.readwrite import SIDES, RWLockBase, RWLockOptions, Side, holders_reply, upgrade_refused
from ..locks.replies import acquire_reply, token, token_reply
from ..locks.types import Holder
from ..locks.waiting import resend
from ..operations import Call, Runner

__all__ = ["RWLock", "RWSide"]


class RWSide:
    """One side (``"read"`` or ``"write"``) of an :class:`RWLock`, lock-like: ``acquire``,
    ``release``, ``holders``, and a context manager giving the fencing token (its exit raises
    ``LockNotOwnedError`` when the side was lost meanwhile, unless the body raised)."""

    __slots__ = ("_code", "lock", "side")

    def __init__(self, lock: RWLock, side: Side) -> None:
        self.lock = lock
        self.side = side
        self._code = SIDES[side]

    def __repr__(self) -> str:
        return f"<{self.side} side of {self.lock!r}>"

    @property
    def job_id(self) -> str:
        """The holder id of calls without one (the lock's: one holder on both sides)."""
        return self.lock.job_id

    def acquire(self, job_id: str | None = None, *, timeout: float | None = None) -> int | None:
        """Take this side for ``job_id`` (default: the calling thread's holder), waiting up
        to ``timeout`` seconds (default: the lock's): the fencing token, or ``None``. A
        holder of the side gets its token back."""
        lock = self.lock
        return lock._acquire(self._code, lock._holder(job_id), lock._wait(timeout))

    def release(self, job_id: str | None = None) -> int | None:
        """Release what ``job_id`` (default: the calling thread's holder) holds on this side:
        the fencing token freed, or ``None`` if it held nothing (or its ttl ran out)."""
        return self.lock._release(self._code, self.lock._holder(job_id))

    def holders(self) -> list[Holder]:
        """Who holds this side now (the writer, or the live readers: at most 1,000), with their
        tokens and seconds left."""
        lock = self.lock
        return holders_reply(lock.client.call("rwlock_inspect", lock.keys, (self._code,)))

    def __enter__(self) -> int:
        got = self.acquire()
        if got is None:
            name, waited = self.lock.name, self.lock.timeout
            raise LockConflictError(f"rwlock {name}: {self.side} side not acquired (waited {waited} s)")
        return got

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.release() is None and exc_type is None:
            raise LockNotOwnedError(f"rwlock {self.lock.name}: {self.side} side lost before release")


class RWLock(RWLockBase[Runner]):
    """A read-write lock on a runner (:class:`~fastlock.operations.Runner`) such as
    :class:`fastlock.Client` (options in :class:`~fastlock.locks.readwrite.RWLockBase`):
    :attr:`read` and :attr:`write`, each an :class:`RWSide`. An uncontended acquire or
    release is one script call; arguments are checked before anything is sent."""

    def __init__(self, client: Runner, name: str, **options: Unpack[RWLockOptions]) -> None:
        super().__init__(client, name, **options)
        self.read = RWSide(self, "read")
        self.write = RWSide(self, "write")

    def _acquire(self, side: str, job: str, wait: float) -> int | None:
        """The fencing token of ``side`` for ``job``, or ``None``: one call (re-sent once if its
        reply was lost), or with ``wait`` > 0 the waiting operation."""
        client = self.client
        if not self._checked:
            client.run(self._policy())
        try:
            if wait > 0:
                listener = getattr(client, "listener", None)
                return token(client.run(self._waiting(side, job, wait, listener)))
            args = self._args(side, job)
            try:
                reply = client.call("rwlock_acquire", self.keys, args)
            except ConnectionError as lost:
                reply = client.run(resend(lost, Call("rwlock_acquire", self.keys, args)))
            return token(acquire_reply("rwlock_acquire", reply))
        except ResponseError as error:
            refused = upgrade_refused(error)
            if refused is None:
                raise
            raise refused from None

    def _release(self, side: str, job: str) -> int | None:
        client = self.client
        if not self._checked:
            client.run(self._policy())
        return token_reply("rwlock_release", client.call("rwlock_release", self.keys, (side, job)))
