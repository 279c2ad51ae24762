# generated from src/fastlock/aio/queue.py by tools/async_to_sync.py, do not edit
"""Job queues with leases: atomic claim, fencing tokens, renewal, recovery, retries, dead letters.

Every transition is one bounded Lua script (``lua/queue_*.lua``) over the queue's keys, all
under one hash tag (``fl:{name}:...``). Deadlines and due times come from the server clock
(``TIME``); clients send durations only. Each claim hands out a fencing token, strictly
increasing per queue; ``complete``, ``fail`` and ``extend`` are refused (:class:`LeaseLost`)
once a job's lease was recovered or re-claimed. Delivery is at least once: a handler may run
again after its lease is lost, so its external effects should be idempotent or fenced with
``job.token``. Layout, costs and semantics: ``docs/queues.md``.

Each method is three parts written once for every transport: the arguments from
:class:`~fastlock.queues.base.QueueBase`, one runner call (or ``runner.run`` of an
operation of several calls), and a reply parser of :mod:`~fastlock.queues.jobs`.

``aio/queue.py``, the asyncio queue, is the source of the sync ``queues/queue.py``:
``tools/async_to_sync.py`` writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import metrics
from ..operations import Runner
from ..queues import admin, observed, schedule
from ..queues.base import MAX_BATCH, QueueBase, checked_int, enqueue_batches, extend_batches, recover_rounds
from ..queues.jobs import (
    Batch,
    DeadJob,
    Job,
    QueueStats,
    Recovered,
    Unique,
    claimed,
    command_replies,
    completed,
    dead_count,
    dead_jobs,
    enqueued,
    enqueued_many,
    extended,
    failed,
    paused_changed,
    progressed,
    queue_stats,
    released,
)
from ..queues.updates import KEEP, on_duplicate_call, progress_call

__all__ = ["Queue"]


class Queue(QueueBase[Runner]):
    """A job queue on a runner (:class:`~fastlock.operations.Runner`) such as
    :class:`fastlock.Client` (see the module docstring; options in :class:`QueueBase`).
    Arguments are checked before anything is sent. On asyncio, :meth:`wait` blocks a
    dedicated connection, not the event loop."""

    # ---- producing

    def enqueue(
        self,
        payload: bytes | str,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: str | Unique | None = None,
        on_duplicate: str = KEEP,
    ) -> str:
        """Add one job and return its id. ``delay``: seconds before it becomes ready;
        ``priority``: ``0 <= p < 2**20``, lower first; prioritised jobs are claimed once no
        job without a priority is ready. A ``job_id`` (a non-empty str not starting with
        :data:`FRESH_MARK`) already present in the queue raises :class:`DuplicateJob`.

        A ``unique`` lock already held: ``on_duplicate="keep"`` raises :class:`DuplicateJob`
        naming the holder; ``"replace"`` gives the holder's job, while it waits (never
        claimed), this payload and delay; ``"extend"`` pushes its due time back to ``delay``
        from now (debounce), its payload kept. Both return the holder's id, and raise
        :class:`DuplicateJob` like ``keep`` when that job is claimed (or not found waiting:
        another priority, or deeper than :data:`~fastlock.queues.updates.REPLACE_WINDOW` in ready)."""
        if on_duplicate is not KEEP or metrics.observer is not None:
            return self._enqueue_other(payload, job_id, delay, priority, unique, on_duplicate)
        keys, args = self._enqueue_call(payload, job_id, delay, priority, unique)
        reply = self.client.call("queue_enqueue", keys, args)
        added = self.core._enqueued(reply, args[0])  # the common reply: the Cython core reads it
        return enqueued(reply, args[0]) if added is None else added

    def _enqueue_other(
        self,
        payload: bytes | str,
        job_id: str | None,
        delay: float | None,
        priority: int | None,
        unique: str | Unique | None,
        on_duplicate: str,
    ) -> str:
        """:meth:`enqueue` with an ``on_duplicate`` choice, or with an observer installed."""
        observer = metrics.observer
        if observer is None:
            call = self._enqueue_call(payload, job_id, delay, priority, unique)
            keys, args = on_duplicate_call(call, on_duplicate)
            return enqueued(self.client.call("queue_enqueue", keys, args), args[0])
        with observer.producing(self.name) as carried:
            call = self._enqueue_call(payload, job_id, delay, priority, unique, carried)
            keys, args = on_duplicate_call(call, on_duplicate)
            found = enqueued(self.client.call("queue_enqueue", keys, args), args[0])
        observer.jobs_enqueued(self.name, 1)
        return found

    def enqueue_many(
        self, payloads: Iterable[bytes | str], *, delay: float | None = None, priority: int | None = None
    ) -> list[str]:
        """Add jobs with fresh ids, :data:`MAX_BATCH` per call (one HSET and one push
        each); returns their ids. ``delay`` and ``priority`` apply to all. Every payload
        is checked before the first call."""
        observer = metrics.observer
        if observer is None:
            return self._enqueue_many(self._enqueue_many_calls(payloads, delay, priority))
        with observer.producing(self.name) as carried:
            ids = self._enqueue_many(self._enqueue_many_calls(payloads, delay, priority, carried))
        observer.jobs_enqueued(self.name, len(ids))
        return ids

    def _enqueue_many(self, calls: list[list[Any]]) -> list[str]:
        if len(calls) == 1:  # direct: no operation to drive
            reply = self.client.call("queue_enqueue_many", self.producer_keys, calls[0])
            return enqueued_many(reply, calls[0])
        return self.client.run(enqueue_batches(self.producer_keys, calls))

    # ---- consuming

    def claim(self, count: int = 1, *, lease: float | None = None) -> Batch:
        """Lease up to ``count`` ready jobs (due delayed jobs are promoted first)."""
        reply = self.client.call("queue_claim", self.worker_keys, self._claim_args(count, lease))
        batch = claimed(reply, self.core)
        if metrics.observer is not None:
            observed.claimed_observed(self, reply, batch)
        return batch

    def complete(self, jobs: Job | Sequence[Job], *, claim: int = 0, lease: float | None = None) -> Batch:
        """Complete ``jobs`` (payloads deleted) and, when ``claim`` > 0, claim the next
        batch in the same round trip; returns that batch.

        Completing again after a lost reply succeeds (within ``keep_completed``). If any
        lease was lost, the others are still completed, nothing is claimed and
        :class:`LeaseLost` lists the lost jobs.
        """
        jobs = (jobs,) if isinstance(jobs, Job) else jobs
        args = self._complete_args(jobs, claim, lease)
        if args is None:
            return self.claim(claim, lease=lease) if claim else Batch()
        reply = self.client.call("queue_complete", self.worker_keys, args)
        if metrics.observer is not None:
            return observed.completed_observed(self, reply, jobs, claim)
        if claim:  # the common reply (no lease lost, jobs claimed): the Cython core reads it
            batch = self.core._completed_jobs(reply, Job, Batch)
            if batch is not None:
                return batch
        return completed(reply, jobs, claim, self.core)

    def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float | None = None, dead: bool = False
    ) -> bool:
        """Give a job back: retried after ``retry_in`` seconds (default: the queue's
        backoff for its attempt), or dead-lettered with ``error`` when ``dead`` or its
        attempts are used up. Returns True when it will be retried."""
        args = self._fail_args(job, error, retry_in, dead)
        retried = failed(self.client.call("queue_fail", self.keys, args), job)
        if metrics.observer is not None:
            observed.report(self, "job_failed", retried)
        return retried

    def extend(self, jobs: Sequence[Job], *, lease: float | None = None) -> list[Job]:
        """Renew the leases of ``jobs`` (one call per :data:`MAX_BATCH`); returns the jobs
        whose lease was lost, after setting their ``lost`` flag (and ``cancelled`` for the
        jobs cancelled while running)."""
        return self.client.run(extend_batches(self.cancel_keys, jobs, self._extend_calls(jobs, lease)))

    def holds(self, job: Job, *, lease: float | None = None) -> bool:
        """Whether ``job``'s lease is still its own, asked of the server in one round trip
        (the lease member carries the fencing token: a recovered, re-claimed or cancelled job
        answers False and gets ``job.lost`` set, and ``job.cancelled`` when cancelled). A held
        lease is renewed for ``lease`` seconds (default: the queue's), so call this right
        before committing an effect."""
        (args,) = self._extend_calls([job], lease)
        return not extended(self.client.call("queue_extend", self.cancel_keys, args), [job])

    def progress(self, job: Job, value: object) -> None:
        """Store ``value`` as ``job``'s progress, shown by :meth:`job`: JSON data, at most
        :data:`~fastlock.queues.updates.PROGRESS_LIMIT` bytes as JSON (else
        :class:`ArgumentError`). Fenced: only the current lease holder may set it; a lost
        lease raises :class:`LeaseLost`. Kept
        :data:`~fastlock.queues.updates.PROGRESS_KEEP` seconds after the last update."""
        keys, args = progress_call(self, job, value)
        progressed(self.client.call("queue_progress", keys, args), job)

    def release(self, jobs: Sequence[Job]) -> list[Job]:
        """Hand back leased jobs that were not started (a stopping worker's batch): each goes
        back to ready at the head of its lane with its attempt given back, in one call of at
        most :data:`MAX_BATCH`. Returns the jobs whose lease was already lost (flagged)."""
        args = self._release_args(jobs)
        return released(self.client.call("queue_release", self.keys, args), jobs) if args else []

    def recover(self, limit: int = MAX_BATCH, *, rounds: int = 1) -> Recovered:
        """Return up to ``limit`` expired leases to ready, or dead-letter those that used
        ``max_attempts``; call again while the limit was reached, up to ``rounds`` calls
        (the counts are totals). Three server commands when nothing expired."""
        args = self._recover_args(limit, rounds)
        found = self.client.run(recover_rounds(self.keys, args, rounds))
        if metrics.observer is not None:
            observed.report(self, "jobs_recovered", found.requeued, found.dead)
        return found

    def wait(self, timeout: float, *, interrupt: str | None = None) -> bool:
        """Block up to ``timeout`` seconds (at least 10 ms) until a producer or another
        worker signals work (BZPOPMIN on the wake marker; no polling), or something is
        added to the sorted set ``interrupt`` (a key under this queue's prefix, see
        :meth:`interrupt`). True if woken."""
        command, seconds = self._wait_args(timeout, interrupt)
        return self.client.execute_blocking(*command, timeout=seconds) is not None

    def interrupt(self, key: str) -> None:
        """Wake the :meth:`wait` given ``interrupt=key`` (or the next one, within a minute)."""
        command_replies(self.client.execute_many(self._interrupt_commands(key)), 2, "interrupt")

    # ---- dead letters and stats

    def dead(self, limit: int = 100, *, older_than: float | None = None) -> list[DeadJob]:
        """The oldest dead-lettered jobs (at most ``limit``), dead for ``older_than`` s or more."""
        args = self._dead_args("list", None, limit, older_than)
        return [] if args is None else dead_jobs(self.client.call("queue_dead", self.keys, args))

    def requeue_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Move dead jobs back to ready with their attempts reset (unique locks are not taken
        again): ``ids`` (at most :data:`MAX_BATCH`), or else the oldest ``limit`` dead for
        ``older_than`` seconds or more. Returns how many moved."""
        args = self._dead_args("requeue", ids, limit, older_than)
        return 0 if args is None else dead_count(self.client.call("queue_dead", self.keys, args))

    def purge_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Delete dead jobs and their payloads, chosen like :meth:`requeue_dead`."""
        args = self._dead_args("purge", ids, limit, older_than)
        return 0 if args is None else dead_count(self.client.call("queue_dead", self.keys, args))

    def pause(self) -> bool:
        """Stop every claim of this queue, across all workers, until :meth:`resume`: claims
        return an empty batch flagged ``paused``; producing, completing and recovery go on.
        True if it was running."""
        return paused_changed(self.client.call("queue_pause", self.plain_keys, ("pause",)))

    def resume(self) -> bool:
        """Let claims go on after :meth:`pause`, waking a waiting worker. True if it was paused."""
        return paused_changed(self.client.call("queue_pause", self.plain_keys, ("resume",)))

    def oldest_ready(self) -> float | None:
        """Seconds the job a claim would take next has been due (its enqueue, plus its delay:
        the due time its fresh id carries, against the server's clock), or ``None``: nothing
        ready, or a given id or a retry there (:func:`~fastlock.queues.admin.oldest_ready`)."""
        return admin.oldest_ready(
            self.client.execute_many(admin.oldest_commands(self.key["ready"], self.key["prio"]))
        )

    def stats(self) -> QueueStats:
        """Job counts and the pause flag, read in one round trip (not a snapshot across the
        four states)."""
        return queue_stats(self.client.execute_many(self._stats_commands()))

    def claims(self) -> int:
        """Leases granted so far, every attempt of every job (the fencing counter: one
        ``GET``). Two readings give the claims per second in between."""
        return int(self.client.execute("GET", self.key["fence"]) or 0)

    # ---- periodic jobs (fastlock.queues.schedule; docs/queues.md, "Periodic jobs")

    def every(self, seconds: float, payload: bytes | str, *, name: str, catch_up: str = "one") -> bool:
        """Enqueue ``payload`` every ``seconds`` (at least :data:`~fastlock.queues.schedule.MIN_PERIOD`,
        ticks at multiples of the period since the epoch, server clock), once per tick however
        many schedulers (:meth:`run_schedules`) run; its jobs' ids are ``name@<due ms>``.
        ``catch_up``: ticks missed while no scheduler ran are dropped (``"skip"``: those
        found a second late or more), enqueued once (``"one"``) or each (``"all"``, at most
        :data:`~fastlock.queues.schedule.MAX_CATCH_UP`). Registering ``name`` again updates it;
        True when it was created or changed."""
        spec = schedule.every_spec(seconds, catch_up)
        return self._schedule(name, spec, payload)

    def cron(
        self, expression: str, payload: bytes | str, *, name: str, tz: str = "UTC", catch_up: str = "one"
    ) -> bool:
        """Enqueue ``payload`` at the times of the cron ``expression`` (croniter's syntax, the
        extra ``fastlock[cron]``) in the time zone ``tz``; otherwise as :meth:`every`."""
        spec = schedule.cron_spec(expression, tz, catch_up)
        return self._schedule(name, spec, payload)

    def _schedule(self, name: str, spec: schedule.Spec, payload: bytes | str) -> bool:
        keys = schedule.schedule_keys(self.plain_keys, self.prefix)
        return self.client.run(schedule.register(keys, name, spec, payload))

    def schedules(self, *, count: int = 1000) -> list[schedule.Schedule]:
        """This queue's schedules (at most ``count``, at most 1000), the next due first."""
        args = ("list", checked_int(count, "count", 1, MAX_BATCH))
        keys = schedule.schedule_keys(self.plain_keys, self.prefix)
        return schedule.schedules(self.client.call("queue_schedule", keys, args))

    def unschedule(self, name: str) -> bool:
        """Remove the schedule ``name`` (its enqueued jobs stay). True if it existed."""
        keys = schedule.schedule_keys(self.plain_keys, self.prefix)
        return bool(self.client.call("queue_schedule", keys, ("del", schedule.check_name(name))))

    def run_schedules(
        self,
        *,
        stop: Callable[[], bool] | None = None,
        idle: float = schedule.IDLE,
        interrupt: str | None = None,
    ) -> int:
        """Be a scheduler of this queue's schedules until ``stop()`` is true (checked at least
        every ``idle`` seconds, and when :meth:`interrupt` is given ``interrupt``; without
        ``stop``, forever): sleep until the next tick is due by the server clock (no polling),
        enqueue it. Any number of schedulers may run; each tick is enqueued once. Returns the
        jobs this one enqueued."""
        keys = schedule.schedule_keys(self.plain_keys, self.prefix)
        key = None if interrupt is None else self._interrupt_key(interrupt)
        return self.client.run(schedule.run_schedules(keys, stop, idle, key))

    # ---- admin (each call bounded by its arguments: fastlock.queues.admin)

    def peek(self, state: str = "ready", *, offset: int = 0, count: int = 20) -> admin.Page:
        """Up to ``count`` (≤ 1000) jobs in ``state`` (ready, delayed, active or dead) from
        ``offset``, in the order they will be claimed, expire or were buried."""
        args = admin.peek_args(state, offset, count)
        return admin.page(self.client.call("queue_peek", self.keys, args), state, offset)

    def job(self, job_id: str, *, window: int = admin.WINDOW) -> admin.JobInfo:
        """What the server holds about job ``job_id`` (``state`` ``missing`` when nothing),
        searching ``window`` entries at each end of each structure; its last
        :meth:`progress`, if any."""
        args = admin.job_args(job_id, window)
        keys = (*self.cancel_keys, self.progress_key(job_id))
        return admin.job_info(self.client.call("queue_job", keys, args), job_id)

    def cancel(self, job_id: str, *, window: int = admin.WINDOW) -> admin.Cancelled:
        """Remove a ready or delayed job, its payload and its held unique lock, atomically. A
        running (active) job loses its lease, payload and ``until_executed`` lock the same
        way and is marked cancelled: its holder's next renewal or :meth:`holds` answers
        False and sets ``job.cancelled``, and a worker ends it as cancelled. A dead job is
        refused, see :class:`~fastlock.queues.admin.Cancelled`."""
        args = admin.cancel_args(job_id, window)
        return admin.cancelled(self.client.call("queue_cancel", self.cancel_keys, args))

    def unique_locks(self, cursor: int = 0, *, count: int = 100) -> tuple[int, list[admin.UniqueLock]]:
        """One HSCAN page of the held unique locks: ``(next cursor, locks)``, 0 ends the walk."""
        return self.client.run(admin.unique_locks(self.key["unique"], cursor, count))

    def unique_lock(self, digest: str) -> admin.UniqueLock | None:
        """The unique lock on ``digest`` (held or ttl), or ``None`` when it is free."""
        return self.client.run(admin.unique_lock(self.key["unique"], self.prefix, digest))
