"""What every transport's queue shares: options, keys, limits, the checked arguments of each
script call (nothing is sent when an argument is wrong), and the operations of more than one
call as generators of steps. Replies are read by the parsers of :mod:`.jobs`; a transport's
queue (:class:`~fastlock.queues.queue.Queue` for a blocking runner) adds the calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypedDict, TypeVar

from .. import _ids as ids_source
from .._impl import core_of
from ..digest import Digester, check_digest
from ..exceptions import ArgumentError, ArgumentTypeError
from ..limits.base import queue_rate_args
from ..operations import Call, Operation
from ..protocol.arguments import duration_ms
from ..protocol.slots import tagged_base
from .ids import CARRY_MARK, FRESH_MARK
from .jobs import Job, Recovered, Unique, enqueued_many, extended, recovered

__all__ = [
    "MAX_BATCH",
    "QueueBase",
    "QueueOptions",
    "checked_int",
    "enqueue_batches",
    "extend_batches",
    "recover_rounds",
]

MAX_BATCH = 1000
"""Most jobs one script call enqueues, claims, completes, extends, recovers or touches."""
ERROR_LIMIT = 4000
"""Characters of a dead job's error text kept in Redis."""
CANCELLED_KEPT = 10_000
"""Cancelled running jobs remembered (their ids, for their holders and :meth:`Queue.job`)."""
MAX_PRIORITY = 2**20
MAX_COUNT = 2**53
"""Largest attempt count, history size or job count a queue takes (exact in Lua's doubles)."""
MAX_KEEP_COMPLETED = 2**31 - 1
"""Largest completion history (Lua turns larger numbers into floating-point text)."""
"""First character of every fresh job id, and of no custom one: the two never collide."""
INTERRUPT_TTL_MS = 60_000
"""An interrupt no wait consumed expires by itself after this long."""
_PAYLOAD_TYPES = (bytes, str, bytearray, memoryview)
_EXACT_PAYLOAD_TYPES = frozenset(_PAYLOAD_TYPES)
_SUFFIXES: tuple[str, ...] = ("ready", "data", "wake", "prio", "seq", "delayed", "unique")
_SUFFIXES += ("active", "fence", "done", "dead", "err")
"""Key suffixes, in the order every queue script receives the keys (lua/shared/_queue_keys.lua):
a plain enqueue gets the first :data:`_PLAIN_KEYS`, the other enqueues the first
:data:`_PRODUCER_KEYS`, claim and complete the first :data:`_WORKER_KEYS` (each key sent costs
the server's Lua time), the others all."""
_PLAIN_KEYS = 3
_PRODUCER_KEYS = 7
_WORKER_KEYS = 10

R = TypeVar("R")


def checked_int(value: object, name: str, low: int, high: int = MAX_COUNT) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``; else ArgumentTypeError or
    ArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, not {type(value).__qualname__!r}")
    if not low <= value <= high:
        raise ArgumentError(f"{name} must be between {low} and {high}, not {value}")
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


def _ids(ids: Iterable[str]) -> tuple[str, ...]:
    if isinstance(ids, str | bytes):
        raise ArgumentTypeError("ids must be an iterable of job ids, not one str")
    chosen = tuple(ids)
    if not all(isinstance(job_id, str) for job_id in chosen):
        raise ArgumentTypeError("job ids must be str")
    return chosen


def _batch_error(count: int, what: str) -> ValueError:
    return ValueError(f"{what} must be between 1 and {MAX_BATCH}, not {count}")


def enqueue_batches(keys: Sequence[str], calls: list[list[Any]]) -> Operation[list[str]]:
    """Run ``queue_enqueue_many`` once per argument list of ``calls`` (``delay, priority,
    id, payload, ...``); returns the ids of every call's jobs."""
    ids: list[str] = []
    for args in calls:
        ids += enqueued_many((yield Call("queue_enqueue_many", keys, args)), args)
    return ids


def extend_batches(keys: Sequence[str], jobs: Sequence[Job], calls: list[list[Any]]) -> Operation[list[Job]]:
    """Run ``queue_extend`` once per argument list of ``calls`` (``lease ms, member, ...``, the
    members of ``jobs`` in order); returns the jobs whose lease was lost."""
    lost: list[Job] = []
    start = 0
    for args in calls:
        chunk = jobs[start : start + len(args) - 1]
        lost += extended((yield Call("queue_extend", keys, args)), chunk)
        start += len(chunk)
    return lost


def recover_rounds(keys: Sequence[str], args: tuple[int, int], rounds: int) -> Operation[Recovered]:
    """Run ``queue_recover`` until it reports nothing more, at most ``rounds`` times; returns
    the totals, ``more`` as the last call said."""
    requeued = dead = 0
    more = False
    for _ in range(rounds):
        done = recovered((yield Call("queue_recover", keys, args)))
        requeued, dead, more = requeued + done.requeued, dead + done.dead, done.more
        if not more:
            break
    return Recovered(requeued, dead, more)


class QueueOptions(TypedDict, total=False):
    """The keyword options of a queue (see :class:`QueueBase`), typed once for every entry
    point (``Queue(...)``, :meth:`Client.queue <fastlock.Client.queue>`)."""

    lease: float
    max_attempts: int
    backoff: float | Callable[[int], float]
    keep_completed: int
    digester: Digester | None
    prefix: str
    rate: tuple[int, float] | tuple[int, float, int] | None


class QueueBase(Generic[R]):
    """A job queue named ``name`` over the transport ``client`` (a
    :class:`~fastlock.operations.Runner` for :class:`Queue`): its options, its keys, and
    the checked arguments of each script call. The methods that send live in the transport's
    subclass.

    ``lease``: default lease in seconds; ``max_attempts``: runs before a failing or
    abandoned job is dead-lettered; ``backoff``: retry delay in seconds for
    :meth:`Queue.fail`, either a callable of the attempt number or a base ``b`` giving
    ``b * 2 ** (attempt - 1)`` capped at one hour; ``keep_completed``: completions
    remembered so a retried :meth:`Queue.complete` succeeds instead of raising (0 = none);
    ``digester``: computes :class:`Unique` digests (the lock API's default: SHA-256);
    ``rate``: ``(count, per)`` or ``(count, per, burst)``, at most ``count`` jobs claimed per
    ``per`` seconds across every worker (GCRA on the server clock, ``burst``, default
    ``count``, at once after a quiet spell; docs/queues.md, "Rate limits").
    Every process using a queue should pass the same options.
    """

    def __init__(
        self,
        client: R,
        name: str,
        *,
        lease: float = 30.0,
        max_attempts: int = 5,
        backoff: float | Callable[[int], float] = 1.0,
        keep_completed: int = 10_000,
        digester: Digester | None = None,
        prefix: str = "fl",
        rate: tuple[int, float] | tuple[int, float, int] | None = None,
    ) -> None:
        self.prefix = tagged_base(prefix, name, "queue")
        self._default_lease_ms = duration_ms(lease, "lease")
        self.max_attempts = checked_int(max_attempts, "max_attempts", 1)
        self._backoff_ms = None if callable(backoff) else duration_ms(backoff, "backoff", minimum_ms=0)
        self.keep_completed = checked_int(keep_completed, "keep_completed", 0, MAX_KEEP_COMPLETED)
        if digester is not None and not isinstance(digester, Digester):
            raise ArgumentTypeError(f"digester must be a Digester, not {type(digester).__qualname__!r}")
        self.client = client
        self.core = core_of(client)  # the client's core: digests, claim replies
        self.name = name
        self.backoff = backoff
        self.digester = digester or Digester(core=self.core)
        self.keys = tuple(self.prefix + suffix for suffix in _SUFFIXES)
        self.key = dict(zip(_SUFFIXES, self.keys, strict=True))
        self.key["cancelled"] = self.prefix + "cancelled"  # the ids of cancelled running jobs
        self.cancel_keys = (*self.keys, self.key["cancelled"])
        self.plain_keys = self.keys[:_PLAIN_KEYS]
        self.producer_keys = self.keys[:_PRODUCER_KEYS]
        self.worker_keys = self.keys[:_WORKER_KEYS]
        self.rate = rate
        if rate is not None:  # claim and complete send the rate key and the GCRA arguments too
            self._rate_args = queue_rate_args(rate)
            self.worker_keys = (*self.worker_keys, self.prefix + "rate")
            self._claim_args = self._rated_claim_args  # type: ignore[method-assign]
            self._complete_args = self._rated_complete_args  # type: ignore[method-assign]

    @property
    def lease(self) -> float:
        """The default lease, in seconds."""
        return self._default_lease_ms / 1000

    def __repr__(self) -> str:
        return f"<fastlock.Queue {self.name!r} lease={self.lease} max_attempts={self.max_attempts}>"

    def unique_digest(self, unique: Unique) -> str:
        """The digest naming ``unique``'s lock in this queue."""
        if not isinstance(unique, Unique):
            raise ArgumentTypeError(f"expected a Unique, not {type(unique).__qualname__!r}")
        if unique.digest is not None:
            return check_digest(unique.digest, self.core)
        return self.digester.digest(unique.name or "", self.name, unique.args)

    def retry_delay(self, attempt: int) -> float:
        """Seconds before retrying a job that failed on ``attempt`` (the ``backoff`` rule)."""
        return self._retry_ms(checked_int(attempt, "attempt", 1)) / 1000

    def _retry_ms(self, attempt: int) -> int:
        if self._backoff_ms is None:
            return duration_ms(self.backoff(attempt), "backoff result", minimum_ms=0)  # type: ignore[operator]
        return round(min(self._backoff_ms * 2.0 ** min(attempt - 1, 64), 3_600_000))

    # ---- the checked arguments of each call (see Queue for what each operation does)

    def _enqueue_call(
        self,
        payload: object,
        job_id: object,
        delay: float | None,
        priority: int | None,
        unique: object,
        carried: str | None = None,
    ) -> tuple[Sequence[str], tuple[Any, ...]]:
        """Keys and arguments of ``queue_enqueue`` (the id first; a plain job's call sends
        only the keys and arguments it uses); a fresh id carries ``carried`` after ``@``."""
        if type(payload) not in _EXACT_PAYLOAD_TYPES:
            _check_payload(payload)
        keys, mode, digest, ttl = self.producer_keys, "", "", 0
        if unique is not None:
            unique = Unique(unique) if isinstance(unique, str) else unique
            if not isinstance(unique, Unique):
                raise ArgumentTypeError(f"unique must be a str or Unique, not {type(unique).__qualname__!r}")
            mode, digest = unique.mode, self.unique_digest(unique)
            if mode == "t":
                ttl = duration_ms(unique.ttl, "ttl")
                keys = (*keys, f"{self.prefix}u:{digest}")
        delay_ms = 0 if delay is None else duration_ms(delay, "delay", minimum_ms=0)
        if job_id is None:
            job_id = ids_source.fresh_id(self.core, delay_ms)
            if carried is not None:
                job_id += CARRY_MARK + carried
        elif not isinstance(job_id, str):
            raise ArgumentTypeError(f"job_id must be a str, not {type(job_id).__qualname__!r}")
        elif not job_id or job_id[0] == FRESH_MARK:
            raise ArgumentError(f"job_id must be non-empty and not start with {FRESH_MARK!r} (fresh ids do)")
        level = "" if priority is None else _level(priority)
        if not (delay_ms or level or mode):
            return self.plain_keys, (job_id, payload)
        return keys, (job_id, payload, delay_ms, level, mode, digest, ttl)

    def _enqueue_many_calls(
        self,
        payloads: Iterable[bytes | str],
        delay: float | None,
        priority: int | None,
        carried: str | None = None,
    ) -> list[list[Any]]:
        """Arguments of each ``queue_enqueue_many`` call, :data:`MAX_BATCH` fresh jobs each
        (their ids carrying ``carried`` after ``@``)."""
        delay_ms = 0 if delay is None else duration_ms(delay, "delay", minimum_ms=0)
        level = "" if priority is None else _level(priority)
        if isinstance(payloads, str | bytes):
            raise ArgumentTypeError("payloads must be an iterable of payloads, not one")
        todo = list(payloads)
        if not set(map(type, todo)) <= _EXACT_PAYLOAD_TYPES:  # in C: no frame per payload
            for payload in todo:
                _check_payload(payload)
        calls = []
        for start in range(0, len(todo), MAX_BATCH):
            chunk = todo[start : start + MAX_BATCH]
            fresh = ids_source.fresh(len(chunk), delay_ms, self.core)
            if carried is not None:
                fresh = [job_id + CARRY_MARK + carried for job_id in fresh]
            args: list[Any] = [delay_ms, level, *fresh, *chunk]
            args[2::2], args[3::2] = fresh, chunk  # id, payload pairs
            calls.append(args)
        return calls

    def _claim_args(self, count: int, lease: float | None) -> tuple[int, int]:
        if type(count) is not int or not 1 <= count <= MAX_BATCH:
            checked_int(count, "count", 1, MAX_BATCH)
        return count, self._default_lease_ms if lease is None else duration_ms(lease, "lease")

    def _rated_claim_args(self, count: int, lease: float | None) -> tuple[Any, ...]:
        return (*QueueBase._claim_args(self, count, lease), *self._rate_args)

    def _rated_complete_args(self, jobs: Sequence[Job], claim: int, lease: float | None) -> list[Any] | None:
        args = QueueBase._complete_args(self, jobs, claim, lease)
        if args is not None:
            args[3:3] = self._rate_args
        return args

    def _complete_args(self, jobs: Sequence[Job], claim: int, lease: float | None) -> list[Any] | None:
        """Arguments of ``queue_complete``, or None when ``jobs`` is empty (nothing to send)."""
        if type(claim) is not int or not 0 <= claim <= MAX_BATCH:
            checked_int(claim, "claim", 0, MAX_BATCH)
        lease_ms = self._default_lease_ms if lease is None else duration_ms(lease, "lease")
        args: list[Any] = [self.keep_completed, claim, lease_ms]
        try:
            for job in jobs:  # a loop, not a list comprehension: no function frame per call
                args.append(job.member)
        except (AttributeError, TypeError):
            raise ArgumentTypeError("jobs must be a Job or a sequence of Jobs from a claim") from None
        if not 1 <= len(jobs) <= MAX_BATCH:
            if not jobs:
                return None
            raise _batch_error(len(jobs), "jobs per complete")
        return args

    def _fail_args(
        self, job: Job, error: str | BaseException, retry_in: float | None, dead: bool
    ) -> tuple[bytes, int, str]:
        _check_job(job)
        if not isinstance(error, str | BaseException) or not isinstance(dead, bool):
            raise ArgumentTypeError("error must be a str or an exception, and dead a bool")
        delay = None if retry_in is None else duration_ms(retry_in, "retry_in", minimum_ms=0)
        if dead or job.attempt >= self.max_attempts:
            delay = -1
        elif delay is None:
            delay = self._retry_ms(job.attempt)
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return job.member, delay, text[:ERROR_LIMIT]

    def progress_key(self, job_id: str) -> str:
        """The key of job ``job_id``'s progress (in the queue's slot)."""
        return f"{self.prefix}p:{job_id}"

    def _extend_calls(self, jobs: Sequence[Job], lease: float | None) -> list[list[Any]]:
        """Arguments of each ``queue_extend`` call, :data:`MAX_BATCH` leases each."""
        lease_ms = self._default_lease_ms if lease is None else duration_ms(lease, "lease")
        if isinstance(jobs, Job | str | bytes) or not isinstance(jobs, Sequence):
            raise ArgumentTypeError(f"expected a sequence of Jobs, not {type(jobs).__qualname__!r}")
        members = [_check_job(job).member for job in jobs]
        starts = range(0, len(members), MAX_BATCH)
        return [[lease_ms, *members[start : start + MAX_BATCH]] for start in starts]

    def _release_args(self, jobs: Sequence[Job]) -> list[bytes]:
        """Arguments of ``queue_release``: the lease members of ``jobs`` (at most :data:`MAX_BATCH`)."""
        if isinstance(jobs, Job | str | bytes) or not isinstance(jobs, Sequence):
            raise ArgumentTypeError(f"expected a sequence of Jobs, not {type(jobs).__qualname__!r}")
        if len(jobs) > MAX_BATCH:
            raise _batch_error(len(jobs), "jobs per release")
        return [_check_job(job).member for job in jobs]

    def _recover_args(self, limit: int, rounds: int) -> tuple[int, int]:
        checked_int(rounds, "rounds", 1, MAX_BATCH)
        return checked_int(limit, "limit", 1, MAX_BATCH), self.max_attempts

    def _wait_args(self, timeout: float, interrupt: str | None) -> tuple[tuple[Any, ...], float]:
        """The ``BZPOPMIN`` command and its wait in seconds."""
        seconds = max(duration_ms(timeout, "timeout", minimum_ms=0), 10) / 1000
        if interrupt is None:
            return ("BZPOPMIN", self.key["wake"], seconds), seconds
        return ("BZPOPMIN", self.key["wake"], self._interrupt_key(interrupt), seconds), seconds

    def _interrupt_commands(self, key: str) -> list[tuple[Any, ...]]:
        key = self._interrupt_key(key)
        return [("ZADD", key, 0, "stop"), ("PEXPIRE", key, INTERRUPT_TTL_MS)]

    def _interrupt_key(self, key: object) -> str:
        if not isinstance(key, str) or not key.startswith(self.prefix):
            raise ArgumentError(f"interrupt must be a key under {self.prefix!r}, not {key!r}")
        return key

    def _dead_args(
        self, op: str, ids: Iterable[str] | None, limit: int, older_than: float | None
    ) -> tuple[Any, ...] | None:
        """Arguments of ``queue_dead``, or None when ``ids`` is given empty (nothing to send)."""
        chosen = () if ids is None else _ids(ids)
        checked_int(limit, "limit", 1, MAX_BATCH)
        age = -1 if older_than is None else duration_ms(older_than, "older_than", minimum_ms=0)
        if ids is not None and not chosen:
            return None
        size = len(chosen) or limit
        if not 1 <= size <= MAX_BATCH:
            raise _batch_error(size, "dead jobs per call")
        return (op, size, age, *chosen)

    def _stats_commands(self) -> list[tuple[Any, ...]]:
        zcard = [("ZCARD", self.key[suffix]) for suffix in ("prio", "delayed", "active", "dead")]
        return [("LLEN", self.key["ready"]), *zcard, ("LINDEX", self.key["ready"], -1)]
