"""Conflict strategies: what happens when a job meets a lock it cannot take.

A strategy is a callable taking a :class:`Conflict`. Locks name one (``on_conflict="log"``),
pass a callable, or give one per side (``{"enqueue": "replace", "execute": "reschedule"}``).
Names resolve in :attr:`LockManager.strategies <fastlock.LockManager.strategies>`, where a
job framework binds its own: fastlock ships none, so ``reject`` (e.g. move the job to a
dead set) and ``reschedule`` (run it again later) raise until a framework binds them::

    locks.strategies["reschedule"] = lambda conflict: my_queue.enqueue_in(5, conflict.job)

On the enqueue side a strategy returning a fencing token means "acquired after all";
on the execute side its return value is what ``Lock.execute`` returns. A conflict's I/O is
written once as operations (:meth:`ConflictBase.evicting`, :meth:`ConflictBase.retrying`,
:func:`replacing`); a sync lock's strategies get a :class:`Conflict` (``evict``/``retry``
block), an async lock's an :class:`AsyncConflict` (they are awaited). An async lock's
strategy may be a plain function or a coroutine function (its result is awaited); ``log``,
``raise``, ``reject`` and ``reschedule`` are shared, ``replace`` awaits its steps there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..exceptions import ArgumentError, ArgumentTypeError, LockConflictError, LockError
from ..operations import AsyncRunner, Call, Operation, Runner
from .replies import token_reply
from .types import LockType, check_job_id
from .waiting import attempt

__all__ = [
    "ASYNC_STRATEGIES",
    "SIDES",
    "STRATEGIES",
    "AsyncConflict",
    "Conflict",
    "ConflictBase",
    "ConflictingLock",
    "Strategy",
    "StrategySpec",
    "replacing",
    "resolve_strategy",
]

logger = logging.getLogger("fastlock.lock")

SIDES = ("enqueue", "execute")


class ConflictingLock(Protocol):
    """What a conflict tells of its lock (a :class:`~fastlock.Lock`)."""

    digest: str
    name: str | None
    type: LockType
    limit: int


@dataclass(frozen=True)
class ConflictBase:
    """A job (``job_id``, the framework's ``job`` object) could not take ``lock`` on ``side``
    (``"enqueue"``: the queue-time lock; ``"execute"``: the runtime lock) because
    ``holders`` (job ids) hold it."""

    lock: ConflictingLock
    job_id: str
    side: str
    holders: tuple[str, ...]
    job: Any = None
    # the release call of a holder in the conflicting scope, the job's acquire call there
    # (without them, evict and retry do nothing)
    _release: Callable[[str], Call] | None = field(repr=False, default=None, kw_only=True)
    _acquire: Call | None = field(repr=False, default=None, kw_only=True)

    def evicting(self, job_id: str) -> Operation[int | None]:
        """``evict`` as an operation."""
        if self._release is None:
            return None
        return token_reply("lock_release", (yield self._release(check_job_id(job_id))))

    def retrying(self) -> Operation[int | None]:
        """``retry`` as an operation."""
        if self._acquire is None:
            return None
        reply = yield from attempt(self._acquire)
        return reply if type(reply) is int else None


@dataclass(frozen=True)
class Conflict(ConflictBase):
    """A conflict of a (sync) :class:`~fastlock.Lock`."""

    _runner: Runner | None = field(repr=False, default=None, kw_only=True)  # the lock's transport

    def evict(self, job_id: str) -> int | None:
        """Release what holder ``job_id`` holds in the conflicting scope; its freed token."""
        return self.run(self.evicting(job_id))

    def retry(self) -> int | None:
        """Try once more, without waiting: the fencing token, or ``None``."""
        return self.run(self.retrying())

    def run(self, operation: Operation[int | None]) -> int | None:
        """Run one of the conflict's operations on the lock's transport."""
        return None if self._runner is None else self._runner.run(operation)


@dataclass(frozen=True)
class AsyncConflict(ConflictBase):
    """A conflict of an :class:`~fastlock.aio.AsyncLock`: ``evict`` and ``retry`` are awaited."""

    _runner: AsyncRunner | None = field(repr=False, default=None, kw_only=True)

    async def evict(self, job_id: str) -> int | None:
        """Release what holder ``job_id`` holds in the conflicting scope; its freed token."""
        return await self.run(self.evicting(job_id))

    async def retry(self) -> int | None:
        """Try once more, without waiting: the fencing token, or ``None``."""
        return await self.run(self.retrying())

    async def run(self, operation: Operation[int | None]) -> int | None:
        """Run one of the conflict's operations on the lock's transport."""
        return None if self._runner is None else await self._runner.run(operation)


Strategy = Callable[[Any], Any]
"""Takes a :class:`Conflict` (an :class:`AsyncConflict` for an async lock)."""
StrategySpec = str | Strategy | None


def log(conflict: ConflictBase) -> None:
    """Log the skipped job at INFO and drop it."""
    logger.info(
        "skipping job %s: lock %s (%s) is held by %s",
        conflict.job_id,
        conflict.lock.digest,
        conflict.side,
        ", ".join(conflict.holders),
    )


def raise_(conflict: ConflictBase) -> None:
    """Raise :class:`~fastlock.LockConflictError`."""
    raise LockConflictError(
        f"job {conflict.job_id}: lock {conflict.lock.digest} ({conflict.side}) "
        f"is held by {', '.join(conflict.holders)}",
        conflict,
    )


def replacing(conflict: ConflictBase) -> Operation[int | None]:
    """:func:`replace` as an operation."""
    for holder in conflict.holders:
        yield from conflict.evicting(holder)
    return (yield from conflict.retrying())


def replace(conflict: Conflict) -> int | None:
    """Evict the holders and try once more (enqueue side). A framework that must also drop
    the replaced jobs from its queue wraps this one."""
    return conflict.run(replacing(conflict))


async def replace_async(conflict: AsyncConflict) -> int | None:
    """:func:`replace` for an async lock."""
    return await conflict.run(replacing(conflict))


def _unbound(name: str) -> Strategy:
    def strategy(conflict: ConflictBase) -> None:
        raise LockError(
            f"conflict strategy {name!r} needs a job framework: bind it in LockManager.strategies"
        )

    strategy.__name__ = name
    return strategy


STRATEGIES: Mapping[str, Strategy] = {
    "log": log,
    "raise": raise_,
    "replace": replace,
    "reject": _unbound("reject"),
    "reschedule": _unbound("reschedule"),
}
ASYNC_STRATEGIES: Mapping[str, Strategy] = {**STRATEGIES, "replace": replace_async}
"""The built-in strategies of async locks."""
_ONLY_ON = {"replace": "enqueue", "reschedule": "execute"}


def resolve_strategy(
    spec: StrategySpec | Mapping[str, StrategySpec], side: str, registry: Mapping[str, Strategy]
) -> Strategy | None:
    """The strategy for ``side`` named or given by ``spec``; ``None`` drops conflicts silently."""
    if not isinstance(spec, str) and isinstance(spec, Mapping):  # str first: no ABC check for names
        unknown = set(spec) - set(SIDES)
        if unknown:
            raise ArgumentError(f"on_conflict sides are {SIDES}, not {sorted(unknown)}")
        spec = spec.get(side)
    if spec is None or callable(spec):
        return spec
    if not isinstance(spec, str):
        raise ArgumentTypeError(
            "on_conflict must be a strategy name, a callable, None or a mapping of sides to them,"
            f" not {type(spec).__qualname__!r}"
        )
    if spec not in registry:
        raise ArgumentError(f"unknown conflict strategy {spec!r}; known: {', '.join(sorted(registry))}")
    if _ONLY_ON.get(spec, side) != side:
        raise ArgumentError(f"conflict strategy {spec!r} applies on the {_ONLY_ON[spec]} side only")
    return registry[spec]
