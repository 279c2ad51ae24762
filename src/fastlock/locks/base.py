"""Unique-job locks: the sidekiq-unique-jobs lock model on Lua scripts, one per transition.

A lock is bound to a digest (see :mod:`fastlock.digest`) and has a type, a ``ttl``
(server-side expiry of each holder's slot), a ``timeout`` (how long a blocking acquire
waits, woken by releases rather than polling) and a ``limit`` (concurrent holders).
Holders are job ids; any process releases a job's lock by ``(name, job_id)``. Every
acquisition gets a fencing token, strictly increasing per lock. Acquire is idempotent
for a job, so re-acquiring after a lost reply is safe (fastlock does it once itself).

:class:`LockBase` is everything but the I/O, written once: settings, holder ids, scopes,
the script calls and operations, conflicts, and what each type does around a job
(each type's :class:`~fastlock.locks.types.LockSpec`). A transport's lock (:class:`~fastlock.Lock`,
:class:`~fastlock.aio.AsyncLock`) runs them: build, call (or run the operation), parse.
The job helpers are not generators of steps: a generator and its driver per helper put the
sync lifecycle over its instruction budget (``bench/budgets.toml``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Never, Protocol, TypeVar

from .. import _ids, metrics
from .._impl import Core
from ..exceptions import ArgumentError, LockError
from ..operations import Call, Command, Operation
from ..protocol.arguments import MAX_DURATION, duration_ms, unknown_options
from .acquiring import Acquiring
from .conflict import ConflictBase, Strategy, StrategySpec, resolve_strategy
from .keys import RUNTIME, Scope
from .namespace import Namespace
from .options import LOCK_OPTIONS
from .renewal import check_renew
from .replies import holders_reply, token
from .types import (
    _BY_NAME,
    MAX_LIMIT,
    SPECS,
    TTL_REQUIRED,
    Holder,
    LockInfo,
    LockSpec,
    LockType,
    check_job_id,
    check_limit,
    missing_ttl,
)

if TYPE_CHECKING:
    from ..operations import AsyncRunner, Runner

__all__ = ["LockBase", "NewLock", "lock_builder"]

R = TypeVar("R", bound="Runner | AsyncRunner")
L = TypeVar("L", bound="LockBase[Any]")

_serials = itertools.count()  # numbers lock objects; with the thread's (or task's) tag, the default job id
_NO_STRATEGIES: Mapping[str, Strategy | None] = MappingProxyType({})  # no strategy on either side


class LockBase(Acquiring, Generic[R]):
    """A lock on one digest; build it with ``client.lock(...)`` or ``manager.lock(...)``.

    ``ttl`` is required: seconds, or an explicit ``None`` for a lock that never expires
    (:data:`~fastlock.locks.types.TTL_REQUIRED`; ``ArgumentError`` without it). Every object
    acting on one digest must use the same ``type`` and ``limit`` (they are part of the
    job's definition, as in sidekiq-unique-jobs). ``job_id`` is the holder id
    the primitives use when called without one: if omitted, an id unique to this object
    *and the calling thread and process* (for an async lock: the calling task), so threads
    or tasks sharing the object are distinct holders; a given ``job_id`` is one holder
    wherever it is used.
    """

    __slots__ = (
        "_call",
        "_flags",
        "_job_id",
        "_main_scope",
        "_queue",
        "_runtime",
        "_serial",
        "_spec",
        "_strategies",
        "_ttl_ms",
        "digest",
        "limit",
        "manager",
        "name",
        "timeout",
        "ttl",
        "type",
    )
    _conflict_type: ClassVar[Callable[..., ConflictBase]]
    """The conflict a strategy of this transport's locks receives."""
    _renews: ClassVar[bool] = False
    """Whether the lock is renewed while held (``renew=True``: a ``RenewingLock``)."""
    # the scopes' keys, bound on first use (_bind): the queue-time one if the type has it,
    # the runtime one if it has that, and the one acquire, release, extend and holders act on
    _queue: Scope
    _runtime: Scope
    _main_scope: Scope | None
    _serial: str | None
    _spec: LockSpec  # what the type is (read instead of comparing types)
    _strategies: Mapping[str, Strategy | None]
    manager: Namespace[R]  # (Acquiring is not generic: a generic base is over the lock path budget)

    def __init__(
        self,
        manager: Namespace[R],
        digest: str,
        name: str | None = None,
        *,
        type: str | LockType = LockType.UNTIL_EXECUTED,  # noqa: A002 - the public keyword is type=
        ttl: float | None = TTL_REQUIRED,
        timeout: float = 0.0,
        limit: int = 1,
        job_id: str | None = None,
        on_conflict: StrategySpec | Mapping[str, StrategySpec] = None,
        renew: bool = False,
        **unknown: Never,
    ) -> None:
        if unknown:
            raise unknown_options(unknown, LOCK_OPTIONS | {"name"})
        kind = self.type = type if type.__class__ is LockType else LockType.parse(type)
        spec = self._spec = SPECS[kind]
        if ttl is None:
            if spec.ttl_required:
                raise ArgumentError(f"an {kind.value} lock needs a ttl")
            ttl_ms = 0
        elif (ttl.__class__ is float or ttl.__class__ is int) and 0.001 <= ttl <= MAX_DURATION:
            ttl_ms = round(ttl * 1000)  # duration_ms's result without its call (the lock path's budget)
        elif ttl is TTL_REQUIRED:
            raise missing_ttl(timeout)
        else:
            ttl_ms = duration_ms(ttl, "ttl")
        if timeout.__class__ is not float or timeout != 0.0:  # the default 0.0 is valid: no call
            duration_ms(timeout, "timeout", minimum_ms=0)
        if limit.__class__ is not int or not 1 <= limit <= MAX_LIMIT:  # (type is the lock type here)
            check_limit(limit)  # raises
        if renew is not False or self._renews:
            if not self._renews:
                raise ArgumentError("renew=True: build the lock with client.lock(..., renew=True)")
            check_renew(True if renew is False else renew, ttl, None)
        self.manager = manager
        self.digest = digest
        self.name = name
        self.ttl = ttl
        self.timeout = timeout
        self.limit = limit
        self._job_id = None if job_id is None else check_job_id(job_id)
        self._serial = None  # drawn when the default holder id is first needed
        self._ttl_ms = ttl_ms
        self._flags = manager.flags
        self._call = manager.call
        self._main_scope = None
        forced = spec.forced_strategy
        if on_conflict is None and forced is None:
            self._strategies = _NO_STRATEGIES
            return
        strategies = self._strategies = {}  # by side; a missing side: None
        if spec.queued:
            strategies["enqueue"] = resolve_strategy(on_conflict, "enqueue", manager.strategies)
        if spec.runtime:
            strategies["execute"] = resolve_strategy(forced or on_conflict, "execute", manager.strategies)

    @property
    def job_id(self) -> str:
        """The holder id of calls without one: the ``job_id`` given, else this object's id in
        the calling thread and process (task, for an async lock)."""
        return self._holder(None)

    def _holder(self, job_id: str | None) -> str:
        """``job_id`` checked, or the default holder id (see :attr:`job_id`)."""
        if job_id is None:
            return self._job_id or _ids.local.tag + (self._serial or self._draw_serial())
        return check_job_id(job_id)

    def _draw_serial(self) -> str:
        """This object's number (with a thread's or task's tag, its default holder id)."""
        serial = self._serial = f"{next(_serials):x}"
        return serial

    def _bind(self) -> Scope:
        """Build the type's scopes (the namespace's eviction policy is checked first, by the
        transport's lock); returns the main one."""
        manager, spec = self.manager, self._spec
        if spec.queued:
            self._queue = manager.scope(self.digest, "", self.limit)
        if spec.runtime:
            self._runtime = manager.scope(self.digest, RUNTIME, self.limit)
        scope = self._main_scope = self._queue if spec.queued else self._runtime
        return scope

    # --- calls and operations ---------------------------------------------------------

    def _wait(self, blocking: bool | None, timeout: float | None) -> float:
        """How long an acquire with these arguments waits."""
        if timeout is not None:
            duration_ms(timeout, "timeout", minimum_ms=0)
        if blocking is False:
            return 0.0
        wait = self.timeout if timeout is None else timeout
        if blocking and not wait > 0:
            raise LockError("a blocking acquire needs a timeout > 0 seconds")
        return wait

    def _report(self, reply: Any, started: float | None) -> None:
        """Tell the installed observer how an acquire ended: ``reply`` a token or a conflict;
        ``started`` (``time.monotonic``) when it waited, ``None`` when it did not."""
        observer = metrics.observer
        if observer is None:
            return
        kind, waited = self._spec.label, 0.0 if started is None else time.monotonic() - started
        if type(reply) is int:
            observer.lock_acquired(kind, waited)
        elif started is None:
            observer.lock_conflict(kind)
        else:
            observer.lock_timed_out(kind, waited)

    def _acquiring(self, job_id: str, wait: float) -> Operation[int | None]:
        """An acquire of the bound main scope as one operation: the token or ``None``."""
        scope = self._main_scope or self._bind()
        taking = self._waiting(scope, job_id, wait) if wait > 0 else self._attempt(scope, job_id)
        return token((yield from taking))

    def _extend_call(self, job_id: str | None, ttl: float | None) -> Call:
        """The extend call (after :meth:`_bind`); :func:`token_reply` reads its reply."""
        if ttl is None and self.ttl is None:
            raise LockError("extend needs a ttl (the lock has none): pass extend(ttl=...)")
        ttl_ms = self._ttl_ms if ttl is None else duration_ms(ttl, "ttl")
        keys = (self._main_scope or self._bind()).keys
        if self._spec.both:
            keys = (*self._runtime.keys, self._queue.wake, *self._queue.slots)
        return Call("lock_extend", keys, (self._holder(job_id), ttl_ms, self.limit))

    def _locked_command(self) -> Command:
        """The command whose truthy reply says someone holds the lock (after :meth:`_bind`)."""
        slots = (self._main_scope or self._bind()).slots
        if self._spec.both:
            slots = slots + self._runtime.slots
        return Command(("EXISTS", *slots))

    def _inspecting(self, scope: Scope) -> Operation[list[Holder]]:
        return holders_reply((yield Call("lock_inspect", scope.keys, ())), scope.name.endswith(RUNTIME))

    def _holding(self) -> Operation[list[Holder]]:
        """The holders (after :meth:`_bind`; with both scopes: queue-time, then runtime)."""
        if self._spec.both:
            return (yield from self._inspecting(self._queue)) + (yield from self._inspecting(self._runtime))
        return (yield from self._inspecting(self._main_scope or self._bind()))

    def _informing(self) -> Operation[LockInfo]:
        """Settings and holders of both scopes (after :meth:`_bind`)."""
        spec = self._spec
        holders = (yield from self._inspecting(self._queue)) if spec.queued else []
        runtime = (yield from self._inspecting(self._runtime)) if spec.runtime else []
        return LockInfo(
            self.digest, self.name, self.type, self.limit, self.ttl, self.timeout, holders, runtime
        )

    # --- conflicts -------------------------------------------------------------------

    def _resolve(
        self, side: str, scope: Scope, job_id: str, reply: list[Any], job: Any
    ) -> tuple[Strategy, ConflictBase] | None:
        """The side's strategy and the conflict it receives (``None``: no strategy, dropped)."""
        strategy = self._strategies.get(side)
        if strategy is None:
            return None
        manager = self.manager
        conflict = self._conflict_type(
            self,
            job_id,
            side,
            tuple(holder.decode() for holder in reply[1:]),
            job,
            _runner=manager.runner,
            _release=lambda holder: manager.release_call(scope, holder),
            _acquire=Call(*self._acquire_call(scope, job_id, self._flags, False)),
        )
        return strategy, conflict

    def __repr__(self) -> str:
        label, kind = self.name or self.digest, self.type.value
        return f"<fastlock.{type(self).__name__} {label} type={kind} limit={self.limit} ttl={self.ttl}>"


# What a core's ``_lock_new`` is told (``_coreparts/domain_new.pxi``: the same lock as the
# class call, the common options' slots set in C): the lock vocabulary.
_SPEC = (
    LockType,
    {kind: spec for kind, spec in SPECS.items() if spec.forced_strategy is None},
    _BY_NAME,
    _NO_STRATEGIES,
    MAX_DURATION,
    MAX_LIMIT,
)


class NewLock(Protocol):
    """A core's ``_lock_new``: the lock ``cls(manager, digest, name, type=kind, ttl=ttl, ...)`` builds."""

    def __call__(
        self,
        cls: type[L],
        manager: Any,
        digest: str,
        name: str | None,
        kind: str | LockType,
        ttl: float | None,
        timeout: float,
        limit: int,
        job_id: str | None,
        on_conflict: StrategySpec | Mapping[str, StrategySpec],
    ) -> L: ...


def lock_builder(core: Core) -> NewLock:
    """``core``'s lock builder, told the lock vocabulary (once per manager)."""
    core._lock_spec(*_SPEC)
    return core._lock_new
