"""Read-write locks: many readers or one writer, with writer preference, fencing tokens, a ttl
per holder and waits without polling (semantics: ``docs/locks.md``, "Read-write locks").

:class:`RWLockBase` is everything but the I/O: options (checked before anything is sent), the
keys (``<prefix>:{name}:rwlock:*``, one cluster slot), holder ids, the script calls, the reply
parsers and the waiting acquire as an operation (:func:`~fastlock.locks.waiting.wait_for`, on
the client's wake-up listener or the wake list). The transport's shell
(:class:`~fastlock.locks.rwlock.RWLock`, :class:`~fastlock.aio.AsyncRWLock`) runs them.

Every script keeps its state in the lock's keys (``lua/shared/_rwlock.lua``): the writer (a
string with the writer's ttl), the readers (a zset scored by each reader's expiry on the
server clock, and their tokens), one fencing counter for both sides, the waiting writers and
the waiters to wake (each counted alive for a few seconds after its last attempt).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Generic, Literal, Never, Required, TypedDict, TypeVar

from .. import _ids
from ..exceptions import LockError, ResponseError
from ..operations import Call, Operation
from ..protocol.arguments import duration_ms, unknown_options
from ..protocol.slots import tagged_base
from .notify import MAX_NAP
from .replies import unexpected_reply
from .types import DEQUEUED, TTL_REQUIRED, WAITED, WAITING, Holder, check_job_id, missing_ttl
from .waiting import WaitPlan, wait_for

if TYPE_CHECKING:
    from ..operations import AsyncRunner, Runner

__all__ = [
    "KEY_SUFFIXES",
    "RWLOCK_OPTIONS",
    "SIDES",
    "RWLockBase",
    "RWLockOptions",
    "Side",
    "holders_reply",
    "upgrade_refused",
]

R = TypeVar("R", bound="Runner | AsyncRunner")
Side = Literal["read", "write"]
SIDES: dict[Side, str] = {"read": "r", "write": "w"}
"""Each side's name in the scripts' arguments."""
KEY_SUFFIXES = ("w", "r", "t", "seq", "ww", "n", "wake")
"""The keys' suffixes, in the scripts' ``KEYS`` order (``lua/shared/_rwlock.lua``): writer,
readers, reader tokens, fencing counter, waiting writers, waiters, wake list."""
_UPGRADE = "rwlock upgrade refused"  # rwlock_acquire's error for a reader asking for the write side

_serials = itertools.count()  # numbers rwlock objects; with the thread's (or task's) tag, the default holder


class RWLockOptions(TypedDict, total=False):
    """The keyword options of a read-write lock (see :class:`RWLockBase`)."""

    ttl: Required[float | None]
    timeout: float
    prefix: str


RWLOCK_OPTIONS = frozenset(RWLockOptions.__required_keys__ | RWLockOptions.__optional_keys__)


def holders_reply(reply: object) -> list[Holder]:
    """Holders from an ``rwlock_inspect`` reply ``[job, token, ms left (-1: none), ...]``."""
    if type(reply) is not list or len(reply) % 3:
        raise unexpected_reply("rwlock_inspect", reply)
    holders = []
    for job, token, ms in zip(reply[::3], reply[1::3], reply[2::3], strict=True):
        if type(job) is not bytes or type(token) is not int or type(ms) is not int:
            raise unexpected_reply("rwlock_inspect", reply)
        holders.append(Holder(job.decode(), token, ms / 1000 if ms >= 0 else None))
    return holders


def upgrade_refused(error: ResponseError) -> LockError | None:
    """The :class:`~fastlock.LockError` of ``rwlock_acquire``'s refusal of an upgrade (a job
    holding the read side asked for the write side), or ``None`` for any other error."""
    message = str(error)
    if _UPGRADE not in message:
        return None
    return LockError(message[message.index(_UPGRADE) :].split(" script:")[0])


class RWLockBase(Generic[R]):
    """A read-write lock named ``name`` over the transport ``client``: many readers or one
    writer. ``ttl`` (required) is each holder's lifetime in seconds, or ``None`` for holders
    that never expire; ``timeout`` is how long an acquire waits by default (0: not at all);
    ``prefix`` starts its keys (``<prefix>:{name}:rwlock:...``, one cluster slot). Every
    object acting on one lock should use the same ``ttl``.

    The default holder of a call without a job id is this object's in the calling thread and
    process (task, for an async lock): threads or tasks sharing the object are distinct holders,
    and a holder of the write side may take the read side too (a downgrade); a holder of the
    read side may not take the write side (``LockError``: release the read side first).
    """

    def __init__(
        self,
        client: R,
        name: str,
        *,
        ttl: float | None = TTL_REQUIRED,
        timeout: float = 0.0,
        prefix: str = "fl",
        **unknown: Never,
    ) -> None:
        if unknown:
            raise unknown_options(unknown, RWLOCK_OPTIONS, "rwlock")
        if ttl is TTL_REQUIRED:
            raise missing_ttl(timeout)
        ttl_ms = 0 if ttl is None else duration_ms(ttl, "ttl")
        duration_ms(timeout, "timeout", minimum_ms=0)
        base = tagged_base(prefix, name, "rwlock")
        self.client = client
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.keys = tuple(f"{base}rwlock:{suffix}" for suffix in KEY_SUFFIXES)
        self.wake = self.keys[-1]
        self._ttl = str(ttl_ms)
        self._serial = f"{next(_serials):x}"
        self._checked = False  # the server's eviction policy (client.locks's check, once per client)

    def __repr__(self) -> str:
        return f"<fastlock.RWLock {self.name!r} ttl={self.ttl} timeout={self.timeout}>"

    @property
    def job_id(self) -> str:
        """The holder id of calls without one: this object's in the calling thread (task)."""
        return self._holder(None)

    def _holder(self, job_id: str | None) -> str:
        """``job_id`` checked, or the default holder id (see :attr:`job_id`)."""
        if job_id is None:
            return _ids.local.tag + self._serial
        return check_job_id(job_id)

    def _wait(self, timeout: float | None) -> float:
        """How long an acquire with this ``timeout`` (``None``: the lock's) waits."""
        if timeout is None:
            return self.timeout
        duration_ms(timeout, "timeout", minimum_ms=0)
        return timeout

    def _policy(self) -> Operation[None]:
        """Check the server's eviction policy once per client (its default lock namespace's
        check: ``allkeys-*`` refused, ``volatile-*`` warned about)."""
        manager = getattr(self.client, "locks", None)
        if manager is not None:
            yield from manager.checking()
        self._checked = True

    def _args(self, side: str, job: str, flags: int = 0, member: str | None = None) -> tuple[Any, ...]:
        """``rwlock_acquire``'s arguments."""
        if member is None:
            return (side, job, self._ttl, flags)
        return (side, job, self._ttl, flags, member)

    def _waiting(self, side: str, job: str, wait: float, listener: Any = None) -> Operation[Any]:
        """An acquire waiting up to ``wait`` seconds, woken by releases (through the client's
        ``listener``, if given, else on the wake list), re-checking at least every
        :data:`~fastlock.locks.notify.MAX_NAP`: the token, or the last conflict reply."""
        if listener is None:
            wait_id = _ids.next_id()
            member = f"b:{wait_id}"
        else:  # the listener's mark ("s": a shard channel) tells a release how to publish
            wait_id = listener.wait_mark + _ids.next_id()
            member = f"{listener.db}:{wait_id}"
        keys = self.keys
        plan = WaitPlan(
            Call("rwlock_acquire", keys, self._args(side, job, WAITING, member)),
            Call("rwlock_acquire", keys, self._args(side, job, WAITING | WAITED, member)),
            self.wake,
            last=Call("rwlock_acquire", keys, self._args(side, job, DEQUEUED | WAITED, member)),
            job=wait_id,
            leave=Call("rwlock_release", keys, (side, job, member)),
            block=MAX_NAP,
            blocker=self._blocker,
        )
        return wait_for(plan, wait, listener)

    def _blocker(self, conflict: list[Any], seconds: float) -> tuple[Any, ...]:
        """The blocked waiter's wait: ``XREAD`` of the wake stream for an entry newer than the
        last one at its attempt (the conflict's third element), at most ``seconds``."""
        ms = max(1, round(seconds * 1000))
        return ("XREAD", "COUNT", 1, "BLOCK", ms, "STREAMS", self.wake, conflict[2])
