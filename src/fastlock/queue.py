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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
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
        """Build a job from its lease member (``token|attempt|priority|unique|id``)."""
        token, attempt, _priority, _unique, job_id = member.split(b"|", 4)
        return cls(job_id.decode(), payload, int(attempt), int(token), member)


class Batch(list[Job]):
    """Jobs from one claim. When nothing was ready, ``next_due_in`` holds the seconds until
    the earliest delayed job is due (server clock), or ``None`` when none is waiting."""

    __slots__ = ("next_due_in",)

    def __init__(self, jobs: Iterable[Job] = (), next_due_in: float | None = None) -> None:
        super().__init__(jobs)
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


def _check_batch(count: int, what: str) -> None:
    if not 1 <= count <= MAX_BATCH:
        raise ValueError(f"{what} must be between 1 and {MAX_BATCH}, not {count}")


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

    def _call(self, script: str, args: Sequence[Any], keys: Sequence[str] | None = None) -> Any:
        return self.client.call(script, keys=self.keys if keys is None else keys, args=args)

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
        new_id = os.urandom(10).hex() if job_id is None else job_id
        args = (new_id, payload, job_id is not None, _ms(delay), self._priority(priority), mode, digest, ttl)
        added, owner = self._call("queue_enqueue", args, keys)
        if not added:
            raise DuplicateJob(owner.decode() if owner is not None else None)
        return new_id

    def enqueue_many(
        self, payloads: Iterable[bytes | str], *, delay: float | None = None, priority: int | None = None
    ) -> list[str]:
        """Add jobs with fresh ids, :data:`MAX_BATCH` per call (one HSET and one push
        each); returns their ids. ``delay`` and ``priority`` apply to all."""
        head = (_ms(delay), self._priority(priority))
        ids: list[str] = []
        chunk: list[bytes | str] = []
        for payload in payloads:
            new_id = os.urandom(10).hex()
            ids.append(new_id)
            chunk += (new_id, payload)
            if len(chunk) == 2 * MAX_BATCH:
                self._call("queue_enqueue_many", (*head, *chunk))
                chunk = []
        if chunk:
            self._call("queue_enqueue_many", (*head, *chunk))
        return ids

    def unique_digest(self, unique: Unique) -> str:
        """The digest naming ``unique``'s lock in this queue."""
        if unique.digest is not None:
            return check_digest(unique.digest)
        return self.digester.digest(unique.name or "", self.name, unique.args)

    @staticmethod
    def _priority(priority: int | None) -> str:
        if priority is None:
            return ""
        if not 0 <= priority < MAX_PRIORITY:
            raise ValueError(f"priority must be in [0, {MAX_PRIORITY}), not {priority}")
        return str(int(priority))

    # ---- consuming

    def claim(self, count: int = 1, *, lease: float | None = None) -> Batch:
        """Lease up to ``count`` ready jobs (due delayed jobs are promoted first)."""
        _check_batch(count, "count")
        return self._batch(self._call("queue_claim", (count, self._lease_ms(lease), PROMOTE_LIMIT)))

    def complete(self, jobs: Job | Sequence[Job], *, claim: int = 0, lease: float | None = None) -> Batch:
        """Complete ``jobs`` (payloads deleted) and, when ``claim`` > 0, claim the next
        batch in the same round trip; returns that batch.

        Completing again after a lost reply succeeds (within ``keep_completed``). If any
        lease was lost, the others are still completed, nothing is claimed and
        :class:`LeaseLost` lists the lost jobs.
        """
        jobs = [jobs] if isinstance(jobs, Job) else jobs
        if not jobs:
            return self.claim(claim, lease=lease) if claim else Batch()
        _check_batch(len(jobs), "jobs per complete")
        if claim:
            _check_batch(claim, "claim")
        args: list[int | bytes] = [self.keep_completed, claim, self._lease_ms(lease), PROMOTE_LIMIT]
        args += [job.member for job in jobs]
        lost, claimed = self._call("queue_complete", args)
        if lost:
            raise LeaseLost([jobs[i - 1] for i in lost])
        return self._batch(claimed) if claim else Batch()

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
        outcome = self._call("queue_fail", (job.member, delay, text[:ERROR_LIMIT]))
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
            _now, *gone = self._call("queue_extend", (lease_ms, *(job.member for job in chunk)))
            for index in gone:
                chunk[index - 1].lost = True
                lost.append(chunk[index - 1])
        return lost

    def recover(self, limit: int = MAX_BATCH) -> Recovered:
        """Return up to ``limit`` expired leases to ready, or dead-letter those that used
        ``max_attempts``. Three server commands when nothing expired."""
        _check_batch(limit, "limit")
        requeued, dead, more = self._call("queue_recover", (limit, self.max_attempts))
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
        _check_batch(len(chosen) or limit, "dead jobs per call")
        age = -1 if older_than is None else _ms(older_than)
        return self._call("queue_dead", (op, len(chosen) or limit, age, *chosen))

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

    @staticmethod
    def _batch(reply: list[Any]) -> Batch:
        now, next_due, *leases = reply
        if not leases:
            return Batch((), None if next_due == -1 else max(0.0, (float(next_due) - now) / 1000))
        pairs = zip(leases[::2], leases[1::2], strict=True)
        return Batch([Job.from_lease(member, payload) for member, payload in pairs])
