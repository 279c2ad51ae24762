"""Read-write locks: :class:`AsyncRWLock`, its :attr:`~AsyncRWLock.read` and
:attr:`~AsyncRWLock.write` sides (:class:`AsyncRWSide`), thin over
:class:`~fastlock.locks.readwrite.RWLockBase` (semantics: ``docs/locks.md``, "Read-write
locks"). ``aio/rwlock.py`` is the source of the sync ``locks/rwlock.py``:
``tools/async_to_sync.py`` writes it."""

from __future__ import annotations

from typing import Any, Unpack

from ..exceptions import ConnectionError, LockConflictError, LockNotOwnedError, ResponseError
from ..locks.readwrite import SIDES, RWLockBase, RWLockOptions, Side, holders_reply, upgrade_refused
from ..locks.replies import acquire_reply, token, token_reply
from ..locks.types import Holder, check_job_id
from ..locks.waiting import resend
from ..operations import AsyncRunner, Call

if True:  # ASYNC
    from collections.abc import Coroutine

    from .lock import _task_tag

__all__ = ["AsyncRWLock", "AsyncRWSide"]


class AsyncRWSide:
    """One side (``"read"`` or ``"write"``) of an :class:`AsyncRWLock`, lock-like: ``acquire``,
    ``release``, ``holders``, and a context manager giving the fencing token (its exit raises
    ``LockNotOwnedError`` when the side was lost meanwhile, unless the body raised)."""

    __slots__ = ("_code", "lock", "side")

    def __init__(self, lock: AsyncRWLock, side: Side) -> None:
        self.lock = lock
        self.side = side
        self._code = SIDES[side]

    def __repr__(self) -> str:
        return f"<{self.side} side of {self.lock!r}>"

    @property
    def job_id(self) -> str:
        """The holder id of calls without one (the lock's: one holder on both sides)."""
        return self.lock.job_id

    if True:  # ASYNC: the holder resolved at the call, in the calling task

        def acquire(
            self, job_id: str | None = None, *, timeout: float | None = None
        ) -> Coroutine[Any, Any, int | None]:
            """Take this side for ``job_id`` (default: the calling task's holder, whichever task
            runs the coroutine), waiting up to ``timeout`` seconds (default: the lock's): the
            fencing token, or ``None``. A holder of the side gets its token back."""
            lock = self.lock
            return lock._acquire(self._code, lock._holder(job_id), lock._wait(timeout))

        def release(self, job_id: str | None = None) -> Coroutine[Any, Any, int | None]:
            """Release what ``job_id`` (default: the calling task's holder) holds on this side:
            the fencing token freed, or ``None`` if it held nothing (or its ttl ran out)."""
            return self.lock._release(self._code, self.lock._holder(job_id))

    else:

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

    async def holders(self) -> list[Holder]:
        """Who holds this side now (the writer, or the live readers: at most 1,000), with their
        tokens and seconds left."""
        lock = self.lock
        return holders_reply(await lock.client.call("rwlock_inspect", lock.keys, (self._code,)))

    async def __aenter__(self) -> int:
        got = await self.acquire()
        if got is None:
            name, waited = self.lock.name, self.lock.timeout
            raise LockConflictError(f"rwlock {name}: {self.side} side not acquired (waited {waited} s)")
        return got

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if await self.release() is None and exc_type is None:
            raise LockNotOwnedError(f"rwlock {self.lock.name}: {self.side} side lost before release")


class AsyncRWLock(RWLockBase[AsyncRunner]):
    """A read-write lock on a runner (:class:`~fastlock.operations.AsyncRunner`) such as
    :class:`fastlock.aio.Client` (options in :class:`~fastlock.locks.readwrite.RWLockBase`):
    :attr:`read` and :attr:`write`, each an :class:`AsyncRWSide`. An uncontended acquire or
    release is one script call; arguments are checked before anything is sent."""

    def __init__(self, client: AsyncRunner, name: str, **options: Unpack[RWLockOptions]) -> None:
        super().__init__(client, name, **options)
        self.read = AsyncRWSide(self, "read")
        self.write = AsyncRWSide(self, "write")

    if True:  # ASYNC: the calling task's holder

        def _holder(self, job_id: str | None) -> str:
            if job_id is None:
                return _task_tag() + self._serial
            return check_job_id(job_id)

        def __repr__(self) -> str:
            return f"<fastlock.aio.AsyncRWLock {self.name!r} ttl={self.ttl} timeout={self.timeout}>"

    async def _acquire(self, side: str, job: str, wait: float) -> int | None:
        """The fencing token of ``side`` for ``job``, or ``None``: one call (re-sent once if its
        reply was lost), or with ``wait`` > 0 the waiting operation."""
        client = self.client
        if not self._checked:
            await client.run(self._policy())
        try:
            if wait > 0:
                listener = getattr(client, "listener", None)
                return token(await client.run(self._waiting(side, job, wait, listener)))
            args = self._args(side, job)
            try:
                reply = await client.call("rwlock_acquire", self.keys, args)
            except ConnectionError as lost:
                reply = await client.run(resend(lost, Call("rwlock_acquire", self.keys, args)))
            return token(acquire_reply("rwlock_acquire", reply))
        except ResponseError as error:
            refused = upgrade_refused(error)
            if refused is None:
                raise
            raise refused from None

    async def _release(self, side: str, job: str) -> int | None:
        client = self.client
        if not self._checked:
            await client.run(self._policy())
        return token_reply("rwlock_release", await client.call("rwlock_release", self.keys, (side, job)))
