"""The lock vocabulary shared by every lock module: :class:`LockType` and what each type is
(:data:`SPECS`, one :class:`LockSpec` per type), :class:`Holder`, :class:`LockInfo`, job ids,
and the acquire flag bits, read from the one definition the Lua scripts include
(``lua/shared/_lock_flags.lua``)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import ArgumentError, ArgumentTypeError
from ..scripts.registry import builtin_folder

__all__ = [
    "FENCING",
    "MAX_LIMIT",
    "SPECS",
    "TRACK",
    "check_limit",
    "DEQUEUED",
    "FAIR",
    "FRESH",
    "LISTENS",
    "QUEUED",
    "WAITED",
    "WAITING",
    "Execution",
    "Holder",
    "LockInfo",
    "LockSpec",
    "LockType",
    "TTL_REQUIRED",
    "check_job_id",
    "missing_ttl",
]

MAX_LIMIT = 1000  # most holders a lock may have


class _TtlRequired:
    """The type of :data:`TTL_REQUIRED`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<required: seconds or None>"


TTL_REQUIRED: Any = _TtlRequired()
"""The default of every lock's ``ttl=``: none, the caller chooses (seconds, or ``None`` for a
lock that never expires); a lock built without one raises :func:`missing_ttl`'s error. Typed
``Any`` so that the signatures keep saying ``ttl: float | None``."""


def missing_ttl(timeout: object) -> ArgumentError:
    """The error of a lock built without ``ttl=`` (``timeout``: the one given, named if it
    looks like redis-py's lifetime)."""
    message = (
        "a lock needs ttl=<seconds> (each holder's slot expires after it, so a crashed holder "
        "frees the lock) or an explicit ttl=None (held until released: for ever if its holder dies)"
    )
    if timeout.__class__ in (int, float) and timeout != 0:
        message += (
            f"; timeout={timeout!r} is how long acquire waits, not the lock's lifetime as in "
            f"redis-py: did you mean ttl={timeout!r}? (fastlock.compat.redis_py.Lock takes "
            "redis-py's arguments)"
        )
    return ArgumentError(message)


def _lua_flags() -> dict[str, int]:
    """The bits ``local TRACK, FENCING, ... = 1, 2, ...`` of ``shared/_lock_flags.lua``."""
    source = (builtin_folder() / "shared" / "_lock_flags.lua").read_text(encoding="utf-8")
    found = re.search(r"^local ([A-Z_, ]+) = ([\d, ]+)$", source, re.MULTILINE)
    if found is None:
        raise ImportError("shared/_lock_flags.lua does not define the lock flag bits")
    names, values = found[1].split(", "), found[2].split(", ")
    return dict(zip(names, map(int, values), strict=True))


_FLAGS = _lua_flags()
TRACK = _FLAGS["TRACK"]  # keep the scope in the bucket index
FENCING = _FLAGS["FENCING"]  # mint tokens from the bucket's counter
WAITING = _FLAGS["WAITING"]  # on conflict, flag the holders' slots so that a release wakes a waiter
WAITED = _FLAGS["WAITED"]  # the acquirer waited: its own slot wakes the next waiter on release
QUEUED = _FLAGS["QUEUED"]  # on conflict, enter the listening waiter in the scope's hand-over queue
DEQUEUED = _FLAGS["DEQUEUED"]  # on conflict, leave that queue (the waiter's last attempt)
FAIR = _FLAGS["FAIR"]  # a free slot goes to a live queued waiter ahead of the caller first
LISTENS = _FLAGS["LISTENS"]  # the acquirer waits on a listener: it flags holders QUEUED_BY, not BLOCKED
FRESH = _FLAGS["FRESH"]  # with QUEUED: a new member (not queued yet): taking a slot dequeues nothing


class LockType(str, enum.Enum):  # noqa: UP042 - StrEnum needs Python 3.11
    """When a job's lock is taken and released (sidekiq-unique-jobs semantics)."""

    UNTIL_EXECUTING = "until_executing"
    UNTIL_EXECUTED = "until_executed"
    UNTIL_EXPIRED = "until_expired"
    WHILE_EXECUTING = "while_executing"
    WHILE_EXECUTING_REJECT = "while_executing_reject"
    UNTIL_AND_WHILE_EXECUTING = "until_and_while_executing"

    @classmethod
    def parse(cls, value: str | LockType) -> LockType:
        """A type from its name or one of sidekiq-unique-jobs' aliases."""
        if type(value) is str and value in _BY_NAME:
            return _BY_NAME[value]
        if not isinstance(value, str):
            raise ArgumentTypeError(f"type must be a LockType or its name, not {type(value).__qualname__!r}")
        try:
            return cls(_ALIASES.get(str(value), value))
        except ValueError:
            known = ", ".join(t.value for t in cls)
            raise ArgumentError(f"unknown lock type {value!r}; known: {known} (and aliases)") from None

    @property
    def spec(self) -> LockSpec:
        """What this type is: its scopes, its job-helper steps, its forced strategy."""
        return SPECS[self]

    @property
    def queued(self) -> bool:
        """True when the type locks at enqueue time (the digest's queue scope)."""
        return SPECS[self].queued

    @property
    def runtime(self) -> bool:
        """True when the type locks while the job runs (the digest's ``:run`` scope)."""
        return SPECS[self].runtime


@dataclass(frozen=True, slots=True)
class Execution:
    """What :meth:`Lock.execute <fastlock.Lock.execute>` does around the job for one lock
    type, as data (each transport's lock runs it in these steps, in this order):

    1. ``release_first``: release the queue-time lock;
    2. ``runtime``: take the runtime lock (waiting up to ``timeout``; with ``handoff`` in the
       script that releases the queue-time lock); not taken: the execute-side strategy's
       result is returned and the job does not run;
    3. run the job; if it raises and ``relock``: take the queue-time lock again;
    4. ``runtime``: release the runtime lock, whatever the job did;
    5. ``release_after``: once the job returned, release the queue-time lock (a warning if
       nothing was held)."""

    release_first: bool = False
    runtime: bool = False
    handoff: bool = False
    relock: bool = False
    release_after: bool = False


@dataclass(frozen=True, slots=True)
class LockSpec:
    """One lock type as data, read by :class:`~fastlock.locks.base.LockBase` and the Cython
    lock builder (``locks/new.pxi``) instead of comparing types.

    ``queued``: it has the queue-time scope (the digest's, taken at enqueue); ``runtime``: the
    runtime scope (``<digest>:run``, taken while the job runs); with both (``both``), acquire
    and release act on the queue-time one, ``extend`` on the runtime one (and the queue-time
    wake key), ``locked`` and ``holders`` on both. ``execution``: the job-helper steps.
    ``forced_strategy``: the execute side's conflict strategy whatever ``on_conflict`` says.
    ``ttl_required``: ``ttl=None`` is refused (the lock is its expiry)."""

    queued: bool
    runtime: bool
    execution: Execution
    forced_strategy: str | None = None
    ttl_required: bool = False
    both: bool = field(init=False)
    label: str = field(init=False, default="")  # the type's value (a metrics label), set below

    def __post_init__(self) -> None:
        object.__setattr__(self, "both", self.queued and self.runtime)


SPECS: dict[LockType, LockSpec] = {
    LockType.UNTIL_EXECUTING: LockSpec(True, False, Execution(release_first=True, relock=True)),
    LockType.UNTIL_EXECUTED: LockSpec(True, False, Execution(release_after=True)),
    LockType.UNTIL_EXPIRED: LockSpec(True, False, Execution(), ttl_required=True),
    LockType.WHILE_EXECUTING: LockSpec(False, True, Execution(runtime=True)),
    LockType.WHILE_EXECUTING_REJECT: LockSpec(False, True, Execution(runtime=True), forced_strategy="reject"),
    LockType.UNTIL_AND_WHILE_EXECUTING: LockSpec(
        True, True, Execution(runtime=True, handoff=True, relock=True)
    ),
}
"""Every lock type's spec (sidekiq-unique-jobs' semantics), written once: a new type is a
:class:`LockType` member and its entry here (``docs/locks.md``, "Adding a lock type")."""
for _kind, _spec in SPECS.items():
    object.__setattr__(_spec, "label", _kind.value)

_ALIASES = {
    "while_enqueued": "until_executing",
    "until_completed": "until_executed",
    "until_performed": "until_executed",
    "until_processed": "until_executed",
    "until_successfully_completed": "until_executed",
    "around_perform": "while_executing",
    "while_busy": "while_executing",
    "while_working": "while_executing",
}
_BY_NAME = {  # parse's fast path: every name and alias to its type
    **{kind.value: kind for kind in LockType},
    **{alias: LockType(name) for alias, name in _ALIASES.items()},
}


@dataclass(frozen=True)
class Holder:
    """One holder of a lock: ``ttl`` is the seconds left before its slot expires (``None``: never);
    ``runtime``: it holds the runtime (``:run``) scope."""

    job_id: str
    token: int
    ttl: float | None
    runtime: bool = False


@dataclass(frozen=True)
class LockInfo:
    """A lock's settings and its holders now (``runtime_holders``: the ``:run`` scope)."""

    digest: str
    name: str | None
    type: LockType
    limit: int
    ttl: float | None
    timeout: float
    holders: list[Holder]
    runtime_holders: list[Holder]


def check_limit(limit: object) -> int:
    """``limit`` if it is an int (not a bool) from 1 to :data:`MAX_LIMIT`; else
    ``ArgumentTypeError`` or ``ArgumentError``."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ArgumentTypeError(f"limit must be an int, not {type(limit).__qualname__!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ArgumentError(f"limit must be between 1 and {MAX_LIMIT}, not {limit!r}")
    return limit


def check_job_id(job_id: object) -> str:
    """``job_id`` if it is a non-empty ``str``; else ``ArgumentTypeError`` or ``ArgumentError``."""
    if isinstance(job_id, str):
        if job_id:
            return job_id
        raise ArgumentError("a job id must be a non-empty str, not ''")
    raise ArgumentTypeError(f"a job id must be a non-empty str, not {type(job_id).__qualname__!r}")
