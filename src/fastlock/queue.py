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

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import count as counter
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from .cluster import hash_tag
from .digest import Digester, check_digest
from .exceptions import DuplicateJob, LeaseLost
from .lock import LockType

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Batch", "DeadJob", "Job", "Queue", "QueueStats", "Recovered", "Unique"]

MAX_BATCH = 1000
"""Most jobs one script call enqueues, claims, completes, extends, recovers or touches."""
PROMOTE_LIMIT = 100
"""Most due delayed jobs one claim moves to ready (the rest follow on later claims)."""
ERROR_LIMIT = 4000
"""Characters of a dead job's error text kept in Redis."""
MAX_PRIORITY = 2**20
_SUFFIXES: tuple[str, ...] = ("ready", "prio", "seq", "delayed", "active", "data", "fence", "done")
_SUFFIXES += ("unique", "dead", "err", "wake")
"""Key suffixes, in the order every queue script receives the keys (lua/shared/_queue_keys.lua)."""


def _id_source() -> Iterator[str]:
    """Fresh job ids: a random 64-bit prefix drawn once per process, then a counter (24 hex
    characters; longer past 2**32 ids). ``next()`` on it is one C call: thread-safe."""
    return map(f"{os.urandom(8).hex()}%08x".__mod__, counter())


_job_ids = _id_source()


def _new_id_source() -> None:
    global _job_ids
    _job_ids = _id_source()  # a forked child must not repeat its parent's ids


os.register_at_fork(after_in_child=_new_id_source)


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
        if (lock_type is LockType.UNTIL_EXPIRED) != (self.ttl is not None and self.ttl > 0):
            raise ValueError("until_expired takes a positive ttl; the other types take none")
        if (self.name is None) == (self.digest is None):
            raise ValueError("give either a name (and args) or a digest")
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


def _ms(seconds: float | None) -> int:
    return 0 if seconds is None else max(0, round(seconds * 1000))


def _level(priority: int) -> str:
    if not 0 <= priority < MAX_PRIORITY:
        raise ValueError(f"priority must be in [0, {MAX_PRIORITY}), not {priority}")
    return str(int(priority))


def _batch_error(count: int, what: str) -> ValueError:
    return ValueError(f"{what} must be between 1 and {MAX_BATCH}, not {count}")


def _claimed(reply: list[Any]) -> Batch:
    """The jobs of a claim reply ``now, next_due, member, payload, ...``
    (lua/shared/_queue_claim.lua); each member is ``token|attempt|priority|unique|id``."""
    batch = Batch()
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
        if _ms(lease) < 1 or max_attempts < 1 or keep_completed < 0:
            raise ValueError("lease must be at least 1 ms, max_attempts >= 1 and keep_completed >= 0")
        self.client = client
        self.name = name
        self._default_lease_ms = _ms(lease)
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.keep_completed = keep_completed
        self.digester = digester or Digester()
        tagged = hash_tag(name.encode()) != name.encode()
        self.prefix = f"{prefix}:{name}:" if tagged else f"{prefix}:{{{name}}}:"
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
        job without a priority is ready. A ``job_id`` already present in the queue, or a
        ``unique`` lock already held, raises :class:`DuplicateJob` naming the holder."""
        keys, mode, digest, ttl = self.keys, "", "", 0
        if unique is not None:
            unique = unique if isinstance(unique, Unique) else Unique(unique)
            mode, digest, ttl = unique.mode, self.unique_digest(unique), _ms(unique.ttl)
            if mode == "t":
                keys = (*keys, f"{self.prefix}u:{digest}")
        new_id = next(_job_ids) if job_id is None else job_id
        delay_ms = 0 if delay is None else _ms(delay)
        level = "" if priority is None else _level(priority)
        args = (new_id, payload, job_id is not None, delay_ms, level, mode, digest, ttl)
        added, owner = self.client.call("queue_enqueue", keys, args)
        if not added:
            raise DuplicateJob(owner.decode() if owner is not None else None)
        return new_id

    def enqueue_many(
        self, payloads: Iterable[bytes | str], *, delay: float | None = None, priority: int | None = None
    ) -> list[str]:
        """Add jobs with fresh ids, :data:`MAX_BATCH` per call (one HSET and one push
        each); returns their ids. ``delay`` and ``priority`` apply to all."""
        delay_ms, level = _ms(delay), "" if priority is None else _level(priority)
        ids: list[str] = []
        todo = iter(payloads)
        while chunk := list(islice(todo, MAX_BATCH)):
            fresh = list(islice(_job_ids, len(chunk)))
            args: list[Any] = [delay_ms, level, *fresh, *chunk]
            args[2::2], args[3::2] = fresh, chunk  # id, payload pairs
            self.client.call("queue_enqueue_many", self.keys, args)
            ids += fresh
        return ids

    def unique_digest(self, unique: Unique) -> str:
        """The digest naming ``unique``'s lock in this queue."""
        if unique.digest is not None:
            return check_digest(unique.digest)
        return self.digester.digest(unique.name or "", self.name, unique.args)

    # ---- consuming

    def claim(self, count: int = 1, *, lease: float | None = None) -> Batch:
        """Lease up to ``count`` ready jobs (due delayed jobs are promoted first)."""
        if not 1 <= count <= MAX_BATCH:
            raise _batch_error(count, "count")
        lease_ms = self._default_lease_ms if lease is None else self._lease_ms(lease)
        return _claimed(self.client.call("queue_claim", self.keys, (count, lease_ms, PROMOTE_LIMIT)))

    def complete(self, jobs: Job | Sequence[Job], *, claim: int = 0, lease: float | None = None) -> Batch:
        """Complete ``jobs`` (payloads deleted) and, when ``claim`` > 0, claim the next
        batch in the same round trip; returns that batch.

        Completing again after a lost reply succeeds (within ``keep_completed``). If any
        lease was lost, the others are still completed, nothing is claimed and
        :class:`LeaseLost` lists the lost jobs.
        """
        jobs = (jobs,) if isinstance(jobs, Job) else jobs
        if not 1 <= len(jobs) <= MAX_BATCH:
            if not jobs:
                return self.claim(claim, lease=lease) if claim else Batch()
            raise _batch_error(len(jobs), "jobs per complete")
        if not 0 <= claim <= MAX_BATCH:
            raise _batch_error(claim, "claim")
        lease_ms = self._default_lease_ms if lease is None else self._lease_ms(lease)
        args: list[int | bytes] = [self.keep_completed, claim, lease_ms, PROMOTE_LIMIT]
        for job in jobs:  # a loop, not a list comprehension: no function frame per call
            args.append(job.member)
        lost, claimed = self.client.call("queue_complete", self.keys, args)
        if lost:
            raise LeaseLost([jobs[i - 1] for i in lost])
        return _claimed(claimed) if claim else Batch()

    def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float | None = None, dead: bool = False
    ) -> bool:
        """Give a job back: retried after ``retry_in`` seconds (default: the queue's
        backoff for its attempt), or dead-lettered with ``error`` when ``dead`` or its
        attempts are used up. Returns True when it will be retried."""
        if dead or job.attempt >= self.max_attempts:
            delay = -1
        else:
            delay = _ms(self.retry_delay(job.attempt) if retry_in is None else retry_in)
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        outcome = self.client.call("queue_fail", self.keys, (job.member, delay, text[:ERROR_LIMIT]))
        if outcome == 0:
            raise LeaseLost([job])
        return bool(outcome == 1)

    def retry_delay(self, attempt: int) -> float:
        """Seconds before retrying a job that failed on ``attempt`` (the ``backoff`` rule)."""
        if callable(self.backoff):
            return float(self.backoff(attempt))
        return min(self.backoff * 2.0 ** (attempt - 1), 3600.0)

    def extend(self, jobs: Sequence[Job], *, lease: float | None = None) -> list[Job]:
        """Renew the leases of ``jobs`` (one call per :data:`MAX_BATCH`); returns the jobs
        whose lease was lost, after setting their ``lost`` flag."""
        lease_ms = self._lease_ms(lease)
        lost: list[Job] = []
        for start in range(0, len(jobs), MAX_BATCH):
            chunk = jobs[start : start + MAX_BATCH]
            args = (lease_ms, *(job.member for job in chunk))
            _now, *gone = self.client.call("queue_extend", self.keys, args)
            for index in gone:
                chunk[index - 1].lost = True
                lost.append(chunk[index - 1])
        return lost

    def recover(self, limit: int = MAX_BATCH) -> Recovered:
        """Return up to ``limit`` expired leases to ready, or dead-letter those that used
        ``max_attempts``. Three server commands when nothing expired."""
        if not 1 <= limit <= MAX_BATCH:
            raise _batch_error(limit, "limit")
        requeued, dead, more = self.client.call("queue_recover", self.keys, (limit, self.max_attempts))
        return Recovered(requeued, dead, bool(more))

    def wait(self, timeout: float, *, interrupt: str | None = None) -> bool:
        """Block up to ``timeout`` seconds (at least 10 ms) until a producer or another
        worker signals work (BZPOPMIN on the wake marker; no polling), or something is
        added to the sorted set ``interrupt`` (a key under this queue's prefix). True if woken."""
        timeout = max(timeout, 0.01)
        keys = (self.key["wake"],) if interrupt is None else (self.key["wake"], interrupt)
        return self.client.execute_blocking("BZPOPMIN", *keys, timeout, timeout=timeout) is not None

    # ---- dead letters and stats

    def dead(self, limit: int = 100, *, older_than: float | None = None) -> list[DeadJob]:
        """The oldest dead-lettered jobs (at most ``limit``), dead for ``older_than`` s or more."""
        reply = self._dead("list", None, limit, older_than)
        jobs = []
        for i in range(0, len(reply), 4):
            job_id, died, payload, info = reply[i : i + 4]
            attempts, _priority, error = (info or b"0||").split(b"|", 2)
            jobs.append(DeadJob(job_id.decode(), payload, int(attempts), error.decode(), float(died) / 1000))
        return jobs

    def requeue_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Move dead jobs back to ready with their attempts reset (unique locks are not taken
        again): ``ids`` (at most :data:`MAX_BATCH`), or else the oldest ``limit`` dead for
        ``older_than`` seconds or more. Returns how many moved."""
        return int(self._dead("requeue", ids, limit, older_than))

    def purge_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Delete dead jobs and their payloads, chosen like :meth:`requeue_dead`."""
        return int(self._dead("purge", ids, limit, older_than))

    def _dead(self, op: str, ids: Iterable[str] | None, limit: int, older_than: float | None) -> Any:
        chosen = () if ids is None else tuple(ids)
        if ids is not None and not chosen:
            return 0
        size = len(chosen) or limit
        if not 1 <= size <= MAX_BATCH:
            raise _batch_error(size, "dead jobs per call")
        age = -1 if older_than is None else _ms(older_than)
        return self.client.call("queue_dead", self.keys, (op, size, age, *chosen))

    def stats(self) -> QueueStats:
        """Job counts, read in one round trip (not a snapshot across the four states)."""
        pipe = self.client.pipeline().execute_command("LLEN", self.key["ready"])
        for suffix in ("prio", "delayed", "active", "dead"):
            pipe.execute_command("ZCARD", self.key[suffix])
        n_ready, n_prio, n_delayed, n_active, n_dead = pipe.execute()
        return QueueStats(n_ready + n_prio, n_delayed, n_active, n_dead)

    # ---- replies

    def _lease_ms(self, lease: float | None) -> int:
        if lease is None:
            return self._default_lease_ms
        lease_ms = _ms(lease)
        if lease_ms < 1:
            raise ValueError("lease must be at least 1 ms")
        return lease_ms
