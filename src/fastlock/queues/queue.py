"""Job queues with leases: atomic claim, fencing tokens, renewal, recovery, retries, dead letters.

Every transition is one bounded Lua script (``lua/queue_*.lua``) over the queue's keys, all
under one hash tag (``fl:{name}:...``). Deadlines and due times come from the server clock
(``TIME``); clients send durations only. Each claim hands out a fencing token, strictly
increasing per queue; ``complete``, ``fail`` and ``extend`` are refused (:class:`LeaseLost`)
once a job's lease was recovered or re-claimed. Delivery is at least once: a handler may run
again after its lease is lost, so its external effects should be idempotent or fenced with
``job.token``. Layout, costs and semantics: ``docs/queues.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _ids as ids_source
from ..digest import Digester, check_digest
from ..exceptions import ArgumentTypeError, DuplicateJob, LeaseLost, ProtocolError
from ..locks.types import LockType
from ..protocol.arguments import duration_ms
from ..protocol.slots import hash_tag

if TYPE_CHECKING:
    from ..sync.client import Client

__all__ = ["Batch", "DeadJob", "Job", "Queue", "QueueStats", "Recovered", "Unique"]

MAX_BATCH = 1000
"""Most jobs one script call enqueues, claims, completes, extends, recovers or touches."""
PROMOTE_LIMIT = 100
"""Most due delayed jobs one claim moves to ready (the rest follow on later claims)."""
ERROR_LIMIT = 4000
"""Characters of a dead job's error text kept in Redis."""
MAX_PRIORITY = 2**20
MAX_COUNT = 2**53
"""Largest attempt count, history size or job count a queue takes (exact in Lua's doubles)."""
MAX_KEEP_COMPLETED = 2**31 - 1
"""Largest completion history (Lua turns larger numbers into floating-point text)."""
FRESH_MARK = "~"
"""First character of every fresh job id, and of no custom one: the two never collide."""
_PAYLOAD_TYPES = (bytes, str, bytearray, memoryview)
_EXACT_PAYLOAD_TYPES = frozenset(_PAYLOAD_TYPES)
_SUFFIXES: tuple[str, ...] = ("ready", "prio", "seq", "delayed", "active", "data", "fence", "done")
_SUFFIXES += ("unique", "dead", "err", "wake")
"""Key suffixes, in the order every queue script receives the keys (lua/shared/_queue_keys.lua)."""


@dataclass(slots=True, eq=False)
class Job:
    """A claimed job: ``attempt`` counts this run (1 for the first); ``token`` is its
    fencing token, strictly increasing per queue. ``lost`` turns true once a heartbeat
    (:meth:`Queue.extend`) finds the lease gone: the job now belongs to someone else."""

    id: str
    payload: bytes
    attempt: int
    token: int
    member: bytes = field(repr=False)
    lost: bool = False

    @classmethod
    def from_lease(cls, member: bytes, payload: bytes) -> Job:
        """Build a job from its lease member (``token|attempt|priority|unique|id``; claims
        parse whole replies with the same steps inlined)."""
        token, attempt, _priority, _unique, job_id = member.split(b"|", 4)
        return cls(job_id.decode(), payload, int(attempt), int(token), member)


class Batch(list[Job]):
    """Jobs from one claim. When nothing was ready, ``next_due_in`` holds the seconds until
    the earliest delayed job is due (server clock), or ``None`` when none is waiting."""

    __slots__ = ("next_due_in",)

    def __init__(self, jobs: Iterable[Job] = (), next_due_in: float | None = None) -> None:
        self.extend(jobs)  # not super().__init__: this runs on every claim
        self.next_due_in = next_due_in


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
            raise ValueError(f"{lock_type.value} locks a running job, not a queued one (use a Lock)")
        if (lock_type is LockType.UNTIL_EXPIRED) != (self.ttl is not None):
            raise ValueError("until_expired takes a positive ttl; the other types take none")
        if self.ttl is not None:
            duration_ms(self.ttl, "ttl")
        if (self.name is None) == (self.digest is None):
            raise ValueError("give either a name (and args) or a digest")
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
    """Job counts: ``ready`` (both lanes), ``delayed``, ``active`` (leased), ``dead``."""

    ready: int
    delayed: int
    active: int
    dead: int


class Recovered(NamedTuple):
    """One :meth:`Queue.recover` call: jobs back to ready, jobs dead-lettered, and whether
    the limit was reached (call again)."""

    requeued: int
    dead: int
    more: bool


def checked_int(value: object, name: str, low: int, high: int = MAX_COUNT) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``; else ArgumentTypeError or
    ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, not {type(value).__qualname__!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, not {value}")
    return value


def _level(priority: object) -> str:
    return str(checked_int(priority, "priority", 0, MAX_PRIORITY - 1))


def _check_payload(payload: object) -> None:
    if type(payload) not in _EXACT_PAYLOAD_TYPES and not isinstance(payload, _PAYLOAD_TYPES):
        raise ArgumentTypeError(f"a payload is bytes or str, not {type(payload).__qualname__!r}")


def _check_job(job: object) -> Job:
    if not isinstance(job, Job):
        raise ArgumentTypeError(f"expected a Job from a claim, not {type(job).__qualname__!r}")
    return job


def _members(jobs: Sequence[Job]) -> list[bytes]:
    """The lease members of ``jobs`` (a sequence of claimed :class:`Job` objects)."""
    if isinstance(jobs, Job | str | bytes) or not isinstance(jobs, Sequence):
        raise ArgumentTypeError(f"expected a sequence of Jobs, not {type(jobs).__qualname__!r}")
    return [_check_job(job).member for job in jobs]


def _ids(ids: Iterable[str]) -> tuple[str, ...]:
    if isinstance(ids, str | bytes):
        raise ArgumentTypeError("ids must be an iterable of job ids, not one str")
    chosen = tuple(ids)
    if not all(isinstance(job_id, str) for job_id in chosen):
        raise ArgumentTypeError("job ids must be str")
    return chosen


def _key_base(prefix: object, name: object) -> str:
    """The queue's key prefix ``<prefix>:<name>:`` (a name without a ``{tag}`` is wrapped in
    one). Refuses names and prefixes that would spread the queue over several cluster slots,
    or give two names the same keys."""
    if not isinstance(name, str) or not isinstance(prefix, str):
        raise ArgumentTypeError("a queue's name and prefix must be str")
    tag = hash_tag(name.encode()).decode()
    if tag == name:  # no {tag}: wrapped in one, so it may not hold braces itself
        if not name or "{" in name or "}" in name:
            raise ValueError(f"queue name {name!r}: give a non-empty name without braces, or a {{tag}}")
        base = f"{prefix}:{{{name}}}:"
    elif name == f"{{{tag}}}":
        raise ValueError(f"queue name {name!r} would share its keys with queue {tag!r}: name it {tag!r}")
    else:
        base = f"{prefix}:{name}:"
    if hash_tag(base.encode()) == base.encode():
        raise ValueError(f"prefix {prefix!r} breaks the queue's hash tag (an empty {{}})")
    return base


def _batch_error(count: int, what: str) -> ValueError:
    return ValueError(f"{what} must be between 1 and {MAX_BATCH}, not {count}")


def _unexpected(script: str, reply: object) -> ProtocolError:
    return ProtocolError(f"unexpected reply from {script}: {reply!r:.200}")


def _picked(jobs: Sequence[Job], indexes: list[Any], script: str, reply: object) -> list[Job]:
    """The jobs a script reply names by 1-based index."""
    try:
        picked = [jobs[i - 1] for i in indexes if i > 0]
        if len(picked) == len(indexes):
            return picked
    except (TypeError, IndexError):
        pass
    raise _unexpected(script, reply)


def _claimed(reply: list[Any]) -> Batch:
    """The jobs of a claim reply ``now, next_due, member, payload, ...``
    (lua/shared/_queue_claim.lua); each member is ``token|attempt|priority|unique|id``."""
    batch = Batch()
    try:
        if len(reply) == 2:
            now, next_due = reply
            if next_due != -1:
                batch.next_due_in = max(0.0, (float(next_due) - now) / 1000)
            return batch
        append = batch.append
        items = islice(reply, 2, None)
        for member in items:  # cheaper than zip(items, items) for the common short claim
            token, attempt, _priority, _unique, job_id = member.split(b"|", 4)
            append(Job(job_id.decode(), next(items), int(attempt), int(token), member))
    except (TypeError, ValueError, AttributeError, StopIteration) as exc:
        raise _unexpected("a claim", reply) from exc
    return batch


class Queue:
    """A job queue named ``name`` on ``client`` (see the module docstring).

    ``lease``: default lease in seconds; ``max_attempts``: runs before a failing or
    abandoned job is dead-lettered; ``backoff``: retry delay in seconds for
    :meth:`fail`, either a callable of the attempt number or a base ``b`` giving
    ``b * 2 ** (attempt - 1)`` capped at one hour; ``keep_completed``: completions
    remembered so a retried :meth:`complete` succeeds instead of raising (0 = none);
    ``digester``: computes :class:`Unique` digests (the lock API's default: SHA-256).
    Every process using a queue should pass the same options.
    """

    def __init__(
        self,
        client: Client,
        name: str,
        *,
        lease: float = 30.0,
        max_attempts: int = 5,
        backoff: float | Callable[[int], float] = 1.0,
        keep_completed: int = 10_000,
        digester: Digester | None = None,
        prefix: str = "fl",
    ) -> None:
        self.prefix = _key_base(prefix, name)
        self._default_lease_ms = duration_ms(lease, "lease")
        self.max_attempts = checked_int(max_attempts, "max_attempts", 1)
        self._backoff_ms = None if callable(backoff) else duration_ms(backoff, "backoff", minimum_ms=0)
        self.keep_completed = checked_int(keep_completed, "keep_completed", 0, MAX_KEEP_COMPLETED)
        if digester is not None and not isinstance(digester, Digester):
            raise ArgumentTypeError(f"digester must be a Digester, not {type(digester).__qualname__!r}")
        self.client = client
        self.name = name
        self.backoff = backoff
        self.digester = digester or Digester()
        self.keys = tuple(self.prefix + suffix for suffix in _SUFFIXES)
        self.key = dict(zip(_SUFFIXES, self.keys, strict=True))

    @property
    def lease(self) -> float:
        """The default lease, in seconds."""
        return self._default_lease_ms / 1000

    def __repr__(self) -> str:
        return f"<fastlock.Queue {self.name!r} lease={self.lease} max_attempts={self.max_attempts}>"

    # ---- producing

    def enqueue(
        self,
        payload: bytes | str,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: str | Unique | None = None,
    ) -> str:
        """Add one job and return its id. ``delay``: seconds before it becomes ready;
        ``priority``: ``0 <= p < 2**20``, lower first; prioritised jobs are claimed once no
        job without a priority is ready. A ``job_id`` (a non-empty str not starting with
        :data:`FRESH_MARK`) already present in the queue, or a ``unique`` lock already held,
        raises :class:`DuplicateJob` naming the holder. No enqueue overwrites a job."""
        _check_payload(payload)
        keys, mode, digest, ttl = self.keys, "", "", 0
        if unique is not None:
            unique = Unique(unique) if isinstance(unique, str) else unique
            if not isinstance(unique, Unique):
                raise ArgumentTypeError(f"unique must be a str or Unique, not {type(unique).__qualname__!r}")
            mode, digest = unique.mode, self.unique_digest(unique)
            if mode == "t":
                ttl = duration_ms(unique.ttl, "ttl")
                keys = (*keys, f"{self.prefix}u:{digest}")
        if job_id is None:
            job_id = FRESH_MARK + next(ids_source.ids)
        elif not isinstance(job_id, str):
            raise ArgumentTypeError(f"job_id must be a str, not {type(job_id).__qualname__!r}")
        elif not job_id or job_id[0] == FRESH_MARK:
            raise ValueError(f"job_id must be non-empty and not start with {FRESH_MARK!r} (fresh ids do)")
        delay_ms = 0 if delay is None else duration_ms(delay, "delay", minimum_ms=0)
        level = "" if priority is None else _level(priority)
        reply = self.client.call("queue_enqueue", keys, (job_id, payload, delay_ms, level, mode, digest, ttl))
        try:
            added, owner = reply
        except (TypeError, ValueError):
            raise _unexpected("queue_enqueue", reply) from None
        if added == 1 and owner == job_id.encode():
            return job_id
        if added == 0 and isinstance(owner, bytes):
            raise DuplicateJob(owner.decode())
        raise _unexpected("queue_enqueue", reply)

    def enqueue_many(
        self, payloads: Iterable[bytes | str], *, delay: float | None = None, priority: int | None = None
    ) -> list[str]:
        """Add jobs with fresh ids, :data:`MAX_BATCH` per call (one HSET and one push
        each); returns their ids. ``delay`` and ``priority`` apply to all. Every payload
        is checked before the first call."""
        delay_ms = 0 if delay is None else duration_ms(delay, "delay", minimum_ms=0)
        level = "" if priority is None else _level(priority)
        if isinstance(payloads, str | bytes):
            raise ArgumentTypeError("payloads must be an iterable of payloads, not one")
        todo = list(payloads)
        if not {type(payload) for payload in todo} <= _EXACT_PAYLOAD_TYPES:
            for payload in todo:
                _check_payload(payload)
        ids: list[str] = []
        for start in range(0, len(todo), MAX_BATCH):
            chunk = todo[start : start + MAX_BATCH]
            fresh = [FRESH_MARK + job_id for job_id in islice(ids_source.ids, len(chunk))]
            args: list[Any] = [delay_ms, level, *fresh, *chunk]
            args[2::2], args[3::2] = fresh, chunk  # id, payload pairs
            added = self.client.call("queue_enqueue_many", self.keys, args)
            if added != len(chunk) or type(added) is not int:
                raise _unexpected("queue_enqueue_many", added)
            ids += fresh
        return ids

    def unique_digest(self, unique: Unique) -> str:
        """The digest naming ``unique``'s lock in this queue."""
        if not isinstance(unique, Unique):
            raise ArgumentTypeError(f"expected a Unique, not {type(unique).__qualname__!r}")
        if unique.digest is not None:
            return check_digest(unique.digest)
        return self.digester.digest(unique.name or "", self.name, unique.args)

    # ---- consuming

    def claim(self, count: int = 1, *, lease: float | None = None) -> Batch:
        """Lease up to ``count`` ready jobs (due delayed jobs are promoted first)."""
        if type(count) is not int or not 1 <= count <= MAX_BATCH:
            checked_int(count, "count", 1, MAX_BATCH)
        lease_ms = self._default_lease_ms if lease is None else duration_ms(lease, "lease")
        return _claimed(self.client.call("queue_claim", self.keys, (count, lease_ms, PROMOTE_LIMIT)))

    def complete(self, jobs: Job | Sequence[Job], *, claim: int = 0, lease: float | None = None) -> Batch:
        """Complete ``jobs`` (payloads deleted) and, when ``claim`` > 0, claim the next
        batch in the same round trip; returns that batch.

        Completing again after a lost reply succeeds (within ``keep_completed``). If any
        lease was lost, the others are still completed, nothing is claimed and
        :class:`LeaseLost` lists the lost jobs.
        """
        if type(claim) is not int or not 0 <= claim <= MAX_BATCH:
            checked_int(claim, "claim", 0, MAX_BATCH)
        lease_ms = self._default_lease_ms if lease is None else duration_ms(lease, "lease")
        jobs = (jobs,) if isinstance(jobs, Job) else jobs
        args: list[int | bytes] = [self.keep_completed, claim, lease_ms, PROMOTE_LIMIT]
        try:
            for job in jobs:  # a loop, not a list comprehension: no function frame per call
                args.append(job.member)
        except (AttributeError, TypeError):
            raise ArgumentTypeError("jobs must be a Job or a sequence of Jobs from a claim") from None
        if not 1 <= len(jobs) <= MAX_BATCH:
            if not jobs:
                return self.claim(claim, lease=lease) if claim else Batch()
            raise _batch_error(len(jobs), "jobs per complete")
        reply = self.client.call("queue_complete", self.keys, args)
        try:
            lost, claimed = reply
        except (TypeError, ValueError):
            raise _unexpected("queue_complete", reply) from None
        if lost:
            raise LeaseLost(_picked(jobs, lost, "queue_complete", reply))
        return _claimed(claimed) if claim else Batch()

    def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float | None = None, dead: bool = False
    ) -> bool:
        """Give a job back: retried after ``retry_in`` seconds (default: the queue's
        backoff for its attempt), or dead-lettered with ``error`` when ``dead`` or its
        attempts are used up. Returns True when it will be retried."""
        _check_job(job)
        if not isinstance(error, str | BaseException) or not isinstance(dead, bool):
            raise ArgumentTypeError("error must be a str or an exception, and dead a bool")
        delay = None if retry_in is None else duration_ms(retry_in, "retry_in", minimum_ms=0)
        if dead or job.attempt >= self.max_attempts:
            delay = -1
        elif delay is None:
            delay = self._retry_ms(job.attempt)
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        outcome = self.client.call("queue_fail", self.keys, (job.member, delay, text[:ERROR_LIMIT]))
        if outcome == 0:
            raise LeaseLost([job])
        if outcome in (1, 2) and type(outcome) is int:
            return outcome == 1
        raise _unexpected("queue_fail", outcome)

    def retry_delay(self, attempt: int) -> float:
        """Seconds before retrying a job that failed on ``attempt`` (the ``backoff`` rule)."""
        return self._retry_ms(checked_int(attempt, "attempt", 1)) / 1000

    def _retry_ms(self, attempt: int) -> int:
        if self._backoff_ms is None:
            return duration_ms(self.backoff(attempt), "backoff result", minimum_ms=0)  # type: ignore[operator]
        return round(min(self._backoff_ms * 2.0 ** min(attempt - 1, 64), 3_600_000))

    def extend(self, jobs: Sequence[Job], *, lease: float | None = None) -> list[Job]:
        """Renew the leases of ``jobs`` (one call per :data:`MAX_BATCH`); returns the jobs
        whose lease was lost, after setting their ``lost`` flag."""
        lease_ms = self._default_lease_ms if lease is None else duration_ms(lease, "lease")
        members = _members(jobs)
        lost: list[Job] = []
        for start in range(0, len(jobs), MAX_BATCH):
            chunk = jobs[start : start + MAX_BATCH]
            args = (lease_ms, *members[start : start + MAX_BATCH])
            reply = self.client.call("queue_extend", self.keys, args)
            try:
                _now, *gone = reply
            except (TypeError, ValueError):
                raise _unexpected("queue_extend", reply) from None
            for job in _picked(chunk, gone, "queue_extend", reply):
                job.lost = True
                lost.append(job)
        return lost

    def holds(self, job: Job, *, lease: float | None = None) -> bool:
        """Whether ``job``'s lease is still its own, asked of the server in one round trip
        (the lease member carries the fencing token: a recovered or re-claimed job answers
        False and gets ``job.lost`` set). A held lease is renewed for ``lease`` seconds
        (default: the queue's), so call this right before committing an effect."""
        return not self.extend([_check_job(job)], lease=lease)

    def recover(self, limit: int = MAX_BATCH) -> Recovered:
        """Return up to ``limit`` expired leases to ready, or dead-letter those that used
        ``max_attempts``. Three server commands when nothing expired."""
        checked_int(limit, "limit", 1, MAX_BATCH)
        reply = self.client.call("queue_recover", self.keys, (limit, self.max_attempts))
        try:
            requeued, dead, more = reply
        except (TypeError, ValueError):
            raise _unexpected("queue_recover", reply) from None
        if type(requeued) is not int or type(dead) is not int or more not in (0, 1):
            raise _unexpected("queue_recover", reply)
        return Recovered(requeued, dead, bool(more))

    def wait(self, timeout: float, *, interrupt: str | None = None) -> bool:
        """Block up to ``timeout`` seconds (at least 10 ms) until a producer or another
        worker signals work (BZPOPMIN on the wake marker; no polling), or something is
        added to the sorted set ``interrupt`` (a key under this queue's prefix). True if woken."""
        timeout = max(duration_ms(timeout, "timeout", minimum_ms=0), 10) / 1000
        keys: tuple[str, ...] = (self.key["wake"],)
        if interrupt is not None:
            if not isinstance(interrupt, str) or not interrupt.startswith(self.prefix):
                raise ValueError(f"interrupt must be a key under {self.prefix!r}, not {interrupt!r}")
            keys += (interrupt,)
        return self.client.execute_blocking("BZPOPMIN", *keys, timeout, timeout=timeout) is not None

    # ---- dead letters and stats

    def dead(self, limit: int = 100, *, older_than: float | None = None) -> list[DeadJob]:
        """The oldest dead-lettered jobs (at most ``limit``), dead for ``older_than`` s or more."""
        reply = self._dead("list", None, limit, older_than)
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
            raise _unexpected("queue_dead", reply) from None
        return jobs

    def requeue_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Move dead jobs back to ready with their attempts reset (unique locks are not taken
        again): ``ids`` (at most :data:`MAX_BATCH`), or else the oldest ``limit`` dead for
        ``older_than`` seconds or more. Returns how many moved."""
        return self._counted(self._dead("requeue", ids, limit, older_than))

    def purge_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Delete dead jobs and their payloads, chosen like :meth:`requeue_dead`."""
        return self._counted(self._dead("purge", ids, limit, older_than))

    @staticmethod
    def _counted(reply: object) -> int:
        if type(reply) is not int:
            raise _unexpected("queue_dead", reply)
        return reply

    def _dead(self, op: str, ids: Iterable[str] | None, limit: int, older_than: float | None) -> Any:
        chosen = () if ids is None else _ids(ids)
        checked_int(limit, "limit", 1, MAX_BATCH)
        age = -1 if older_than is None else duration_ms(older_than, "older_than", minimum_ms=0)
        if ids is not None and not chosen:
            return 0
        size = len(chosen) or limit
        if not 1 <= size <= MAX_BATCH:
            raise _batch_error(size, "dead jobs per call")
        return self.client.call("queue_dead", self.keys, (op, size, age, *chosen))

    def stats(self) -> QueueStats:
        """Job counts, read in one round trip (not a snapshot across the four states)."""
        pipe = self.client.pipeline().execute_command("LLEN", self.key["ready"])
        for suffix in ("prio", "delayed", "active", "dead"):
            pipe.execute_command("ZCARD", self.key[suffix])
        counts = pipe.execute()
        if len(counts) != 5 or not all(type(n) is int for n in counts):
            raise _unexpected("stats", counts)
        n_ready, n_prio, n_delayed, n_active, n_dead = counts
        return QueueStats(n_ready + n_prio, n_delayed, n_active, n_dead)
