"""Jobs, the lease member format, and the parsers of the queue scripts' replies.

Every parser checks the reply's shape and raises :class:`~fastlock.ProtocolError` for
anything the script does not promise (a mismatched or hostile script under the same name),
never a ``TypeError``/``IndexError`` or a silently wrong result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from .._impl import Core
from ..exceptions import (
    ArgumentError,
    ArgumentTypeError,
    DuplicateJob,
    JobCancelled,
    LeaseLost,
    ProtocolError,
    ResponseError,
)
from ..locks.types import LockType
from ..protocol.arguments import duration_ms

__all__ = ["Batch", "CancelledJob", "DeadJob", "Job", "Member", "QueueStats", "Recovered", "Unique"]


class Member(NamedTuple):
    """A lease member, the name of a leased job in the active set:
    ``<token>|<attempt>|<priority>|<unique>|<id>`` (docs/queues.md, "Job words and lease
    members"). ``priority`` is ``""`` or a level's digits; ``unique`` is ``""`` or ``d``
    followed by the digest of an ``until_executed`` lock; the id comes last, so it may hold
    ``|``. The scripts build and split the same format (``lua/shared/_queue_words.lua``).
    This class is the client's definition of it (:func:`claimed` inlines :meth:`decode`)."""

    token: int
    attempt: int
    priority: str
    unique: str
    id: str

    def encode(self) -> bytes:
        """The member as the scripts store it."""
        return f"{self.token}|{self.attempt}|{self.priority}|{self.unique}|{self.id}".encode()

    @classmethod
    def decode(cls, member: bytes) -> Member:
        """The fields of ``member``; ``ValueError`` if it is not one."""
        token, attempt, priority, unique, job_id = member.split(b"|", 4)
        return cls(int(token), int(attempt), priority.decode(), unique.decode(), job_id.decode())


@dataclass(slots=True, eq=False)
class Job:
    """A claimed job: ``attempt`` counts this run (1 for the first); ``token`` is its
    fencing token, strictly increasing per queue; ``member`` its :class:`Member`, encoded.
    ``lost`` turns true once a heartbeat (:meth:`Queue.extend`) finds the lease gone: the
    job now belongs to someone else; ``cancelled`` (and ``lost``) once it finds the job
    cancelled (:meth:`Queue.cancel`): the job is then a :class:`CancelledJob`."""

    id: str
    payload: bytes
    attempt: int
    token: int
    member: bytes = field(repr=False)
    lost: bool = False
    cancelled: ClassVar[bool] = False  # a class's: nothing set per claimed job

    def raise_if_cancelled(self) -> None:
        """Raise :class:`JobCancelled` if the job was seen cancelled (by the heartbeat, an
        :meth:`Queue.extend` or :meth:`Queue.holds`): a handler's cooperative stop."""
        if self.cancelled:
            raise JobCancelled(self.id)


class CancelledJob(Job):
    """A :class:`Job` seen cancelled while it ran (its class changed in place by
    :meth:`Queue.extend` or :meth:`Queue.holds`): ``cancelled`` is true."""

    __slots__ = ()
    cancelled: ClassVar[bool] = True


PAUSED = b"paused"
"""The word a paused queue holds at the tail of its ready list (``lua/shared/_queue_keys.lua``)."""


class Batch(list[Job]):
    """Jobs from one claim. When nothing was ready, ``next_due_in`` holds the seconds until
    the earliest delayed job is due (server clock), or ``None`` when none is waiting;
    ``paused`` is True when the queue is paused (:meth:`Queue.pause`)."""

    next_due_in: float | None = None  # class defaults: no __init__ frame on every claim
    paused: bool = False


_UNIQUE_MODES = {LockType.UNTIL_EXECUTED: "d", LockType.UNTIL_EXECUTING: "s", LockType.UNTIL_EXPIRED: "t"}


@dataclass(frozen=True)
class Unique:
    """Uniqueness for :meth:`Queue.enqueue`: at most one job per digest at a time.

    The digest is :mod:`fastlock.digest`'s for ``(name, queue name, args)``, the one the
    lock API uses, or ``digest`` as given. ``type`` is a lock type that makes sense for a
    queued job: ``until_executed`` (default: held until the job completes or is
    dead-lettered), ``until_executing`` (until a worker claims it) or ``until_expired``
    (for ``ttl`` seconds, whatever the job does). A plain ``str`` passed as ``unique``
    means ``Unique(name)``.
    """

    name: str | None = None
    args: Any = None
    type: str | LockType = LockType.UNTIL_EXECUTED
    ttl: float | None = None
    digest: str | None = None

    def __post_init__(self) -> None:
        lock_type = LockType.parse(self.type)
        if lock_type not in _UNIQUE_MODES:
            raise ArgumentError(f"{lock_type.value} locks a running job, not a queued one (use a Lock)")
        if (lock_type is LockType.UNTIL_EXPIRED) != (self.ttl is not None):
            raise ArgumentError("until_expired takes a positive ttl; the other types take none")
        if self.ttl is not None:
            duration_ms(self.ttl, "ttl")
        if (self.name is None) == (self.digest is None):
            raise ArgumentError("give either a name (and args) or a digest")
        for field_name in ("name", "digest"):
            if not isinstance(getattr(self, field_name), str | None):
                raise ArgumentTypeError(f"Unique {field_name} must be a str")
        object.__setattr__(self, "type", lock_type)

    @property
    def mode(self) -> str:
        """The script's mode letter: ``d`` until executed, ``s`` until executing, ``t`` TTL."""
        return _UNIQUE_MODES[LockType.parse(self.type)]


class DeadJob(NamedTuple):
    """A dead-lettered job: ``died_at`` in seconds since the epoch (server clock)."""

    id: str
    payload: bytes | None
    attempts: int
    error: str
    died_at: float


class QueueStats(NamedTuple):
    """Job counts: ``ready`` (both lanes), ``delayed``, ``active`` (leased), ``dead``; and
    whether claims are ``paused``."""

    ready: int
    delayed: int
    active: int
    dead: int
    paused: bool = False


class Recovered(NamedTuple):
    """One :meth:`Queue.recover` call: jobs back to ready, jobs dead-lettered, and whether
    the limit was reached (call again)."""

    requeued: int
    dead: int
    more: bool


# ---- reply parsers, one per script (the reply each one promises is in its lua/ header)


def unexpected(script: str, reply: object) -> ProtocolError:
    """The error for a reply ``script`` does not promise."""
    return ProtocolError(f"unexpected reply from {script}: {reply!r:.200}")


def _picked(jobs: Sequence[Job], indexes: list[Any], script: str, reply: object) -> list[Job]:
    """The jobs a script reply names by 1-based index."""
    try:
        picked = [jobs[i - 1] for i in indexes if i > 0]
        if len(picked) == len(indexes):
            return picked
    except (TypeError, IndexError):
        pass
    raise unexpected(script, reply)


def enqueued(reply: Any, job_id: str) -> str:
    """``job_id`` if ``queue_enqueue`` added it, the owner's id if it replaced or extended the
    owner's waiting job; :class:`DuplicateJob` naming the holder. (The queue shells let the
    Cython core read the common reply first, ``_enqueued`` in ``_coreparts/domain_jobs.pxi``:
    this function is its twin, run for every reply it leaves.)"""
    try:
        added, owner = reply
    except (TypeError, ValueError):
        raise unexpected("queue_enqueue", reply) from None
    if added == 1 and owner == job_id.encode():
        return job_id
    if added == 0 and isinstance(owner, bytes):
        raise DuplicateJob(owner.decode())
    if added == 2 and isinstance(owner, bytes):  # the owner's waiting job replaced or extended
        return owner.decode()
    raise unexpected("queue_enqueue", reply)


def enqueued_many(reply: Any, args: list[Any]) -> list[str]:
    """The ids of the jobs of one ``queue_enqueue_many`` call with ``args`` (``delay,
    priority, id, payload, ...``), once the reply says it added them all."""
    ids: list[str] = args[2::2]
    if reply != len(ids) or type(reply) is not int:
        raise unexpected("queue_enqueue_many", reply)
    return ids


def claimed(reply: Any, core: Core) -> Batch:
    """The jobs of a claim reply ``now, next_due, member, payload, ...``
    (``lua/shared/_queue_claim.lua``). The Cython core reads a reply with jobs itself
    (``_coreparts/domain_jobs.pxi``: the same batch; this function is its twin, for every reply it
    leaves here)."""
    jobs = core._claimed_jobs(reply, Job, Batch)
    if jobs is not None:
        return jobs
    batch = Batch()
    try:
        if len(reply) == 2:
            now, next_due = reply
            if next_due == -2:
                batch.paused = True
            elif next_due != -1:
                batch.next_due_in = max(0.0, (float(next_due) - now) / 1000)
            return batch
        append = batch.append
        for i in range(2, len(reply), 2):
            member = reply[i]
            # Member.decode inlined: a call per job puts the batched path over its instruction budget
            token, attempt, _priority, _unique, job_id = member.split(b"|", 4)
            append(Job(job_id.decode(), reply[i + 1], int(attempt), int(token), member))
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise unexpected("a claim", reply) from exc
    return batch


def completed(reply: Any, jobs: Sequence[Job], claim: int, core: Core) -> Batch:
    """The batch ``queue_complete`` claimed; :class:`LeaseLost` listing the lost jobs. (The
    queue shells let the Cython core read the common reply first, ``_completed_jobs`` in
    ``_coreparts/domain_jobs.pxi``: this function is its twin, run for every reply it leaves.)"""
    try:
        lost, claim_reply = reply
    except (TypeError, ValueError):
        raise unexpected("queue_complete", reply) from None
    if lost:
        raise LeaseLost(_picked(jobs, lost, "queue_complete", reply))
    return claimed(claim_reply, core) if claim else Batch()


def failed(reply: Any, job: Job) -> bool:
    """Whether ``queue_fail`` will retry ``job`` (False: dead-lettered); :class:`LeaseLost`."""
    if reply == 0:
        raise LeaseLost([job])
    if reply in (1, 2) and type(reply) is int:
        return reply == 1
    raise unexpected("queue_fail", reply)


def progressed(reply: Any, job: Job) -> None:
    """``queue_progress`` stored it; else :class:`LeaseLost` (``job.lost`` set)."""
    if reply == 1 and type(reply) is int:
        return
    if reply == 0 and type(reply) is int:
        job.lost = True
        raise LeaseLost([job])
    raise unexpected("queue_progress", reply)


def extended(reply: Any, jobs: Sequence[Job]) -> list[Job]:
    """The jobs of ``queue_extend``'s call whose lease was lost, their ``lost`` flag set (and
    ``cancelled`` for the cancelled ones, answered as negative indexes)."""
    try:
        _now, *gone = reply
    except (TypeError, ValueError):
        raise unexpected("queue_extend", reply) from None
    if not gone:
        return []
    lost = _picked(jobs, [abs(i) if type(i) is int else i for i in gone], "queue_extend", reply)
    for job, index in zip(lost, gone, strict=True):
        job.lost = True
        if index < 0:  # cancelled
            job.__class__ = CancelledJob
    return lost


def released(reply: Any, jobs: Sequence[Job]) -> list[Job]:
    """The jobs ``queue_release`` found lost (no longer the caller's), their ``lost`` flag set."""
    if not isinstance(reply, list):
        raise unexpected("queue_release", reply)
    lost = _picked(jobs, reply, "queue_release", reply)
    for job in lost:
        job.lost = True
    return lost


def recovered(reply: Any) -> Recovered:
    """The counts of a ``queue_recover`` reply ``{requeued, dead, more}``."""
    try:
        requeued, dead, more = reply
    except (TypeError, ValueError):
        raise unexpected("queue_recover", reply) from None
    if type(requeued) is not int or type(dead) is not int or more not in (0, 1):
        raise unexpected("queue_recover", reply)
    return Recovered(requeued, dead, bool(more))


def dead_jobs(reply: Any) -> list[DeadJob]:
    """The jobs of a ``queue_dead`` list reply ``{id, died ms, payload, error info, ...}``,
    error info being ``<attempts>|<priority>|<error>``."""
    try:
        if len(reply) % 4:
            raise ValueError(reply)
        jobs = []
        for i in range(0, len(reply), 4):
            job_id, died, payload, info = reply[i : i + 4]
            attempts, _priority, error = (info or b"0||").split(b"|", 2)
            died_at = float(died) / 1000
            jobs.append(DeadJob(job_id.decode(), payload, int(attempts), error.decode(), died_at))
    except (TypeError, ValueError, AttributeError):
        raise unexpected("queue_dead", reply) from None
    return jobs


def dead_count(reply: Any) -> int:
    """The count of a ``queue_dead`` requeue or purge reply."""
    if type(reply) is not int:
        raise unexpected("queue_dead", reply)
    return reply


def command_replies(replies: list[Any], count: int, what: str) -> list[Any]:
    """``count`` replies of pipelined commands; the first error reply among them raised."""
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    if len(replies) != count:
        raise unexpected(what, replies)
    return replies


def paused_changed(reply: Any) -> bool:
    """Whether ``queue_pause`` changed the queue's state (1) or found it so already (0)."""
    if reply in (0, 1) and type(reply) is int:
        return reply == 1
    raise unexpected("queue_pause", reply)


def queue_stats(replies: list[Any]) -> QueueStats:
    """The counts of ``LLEN ready`` and ``ZCARD`` of prio, delayed, active and dead, then
    ``LINDEX ready -1`` (the pause marker when paused)."""
    *counts, tail = command_replies(replies, 6, "stats")
    if not all(type(n) is int for n in counts):
        raise unexpected("stats", counts)
    n_ready, n_prio, n_delayed, n_active, n_dead = counts
    paused = tail == PAUSED
    return QueueStats(n_ready - paused + n_prio, n_delayed, n_active, n_dead, paused)
