"""Job queues on asyncio: :class:`AsyncQueue`, the methods of :class:`~fastlock.queues.queue.Queue`
awaited, over the same :class:`~fastlock.queues.calls.QueueBase` arguments, operations and
reply parsers (:mod:`fastlock.queues.jobs`). See ``docs/queues.md``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..operations import AsyncRunner
from ..queues import admin
from ..queues.calls import MAX_BATCH, QueueBase, enqueue_batches, extend_batches, recover_rounds
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
    extended,
    failed,
    queue_stats,
    released,
)

__all__ = ["AsyncQueue"]


class AsyncQueue(QueueBase[AsyncRunner]):
    """A job queue on an :class:`~fastlock.operations.AsyncRunner` such as
    :class:`fastlock.aio.Client`: each method is :class:`~fastlock.queues.queue.Queue`'s
    (same arguments, checks and results), awaited. :meth:`wait` blocks on a dedicated
    connection, not the event loop."""

    # ---- producing

    async def enqueue(
        self,
        payload: bytes | str,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        priority: int | None = None,
        unique: str | Unique | None = None,
    ) -> str:
        """Add one job and return its id (:meth:`Queue.enqueue <fastlock.queues.queue.Queue.enqueue>`)."""
        keys, args = self._enqueue_call(payload, job_id, delay, priority, unique)
        return enqueued(await self.client.call("queue_enqueue", keys, args), args[0])

    async def enqueue_many(
        self, payloads: Iterable[bytes | str], *, delay: float | None = None, priority: int | None = None
    ) -> list[str]:
        """Add jobs with fresh ids, :data:`MAX_BATCH` per call; returns their ids."""
        return await self.client.run(
            enqueue_batches(self.producer_keys, self._enqueue_many_calls(payloads, delay, priority))
        )

    # ---- consuming

    async def claim(self, count: int = 1, *, lease: float | None = None) -> Batch:
        """Lease up to ``count`` ready jobs (due delayed jobs are promoted first)."""
        args = self._claim_args(count, lease)
        return claimed(await self.client.call("queue_claim", self.worker_keys, args))

    async def complete(
        self, jobs: Job | Sequence[Job], *, claim: int = 0, lease: float | None = None
    ) -> Batch:
        """Complete ``jobs`` and claim ``claim`` more in the same round trip
        (:meth:`Queue.complete <fastlock.queues.queue.Queue.complete>`)."""
        jobs = (jobs,) if isinstance(jobs, Job) else jobs
        args = self._complete_args(jobs, claim, lease)
        if args is None:
            return await self.claim(claim, lease=lease) if claim else Batch()
        return completed(await self.client.call("queue_complete", self.worker_keys, args), jobs, claim)

    async def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float | None = None, dead: bool = False
    ) -> bool:
        """Give a job back: retried, or dead-lettered; True when it will be retried."""
        args = self._fail_args(job, error, retry_in, dead)
        return failed(await self.client.call("queue_fail", self.keys, args), job)

    async def extend(self, jobs: Sequence[Job], *, lease: float | None = None) -> list[Job]:
        """Renew the leases of ``jobs``; returns the jobs whose lease was lost."""
        return await self.client.run(extend_batches(self.keys, jobs, self._extend_calls(jobs, lease)))

    async def holds(self, job: Job, *, lease: float | None = None) -> bool:
        """Whether ``job``'s lease is still its own (renewed if so), in one round trip."""
        (args,) = self._extend_calls([job], lease)
        return not extended(await self.client.call("queue_extend", self.keys, args), [job])

    async def release(self, jobs: Sequence[Job]) -> list[Job]:
        """Hand back unstarted leased jobs, attempts given back (:meth:`Queue.release
        <fastlock.queues.queue.Queue.release>`); returns the lost ones."""
        args = self._release_args(jobs)
        return released(await self.client.call("queue_release", self.keys, args), jobs) if args else []

    async def recover(self, limit: int = MAX_BATCH, *, rounds: int = 1) -> Recovered:
        """Return expired leases to ready, or dead-letter those out of attempts."""
        args = self._recover_args(limit, rounds)
        return await self.client.run(recover_rounds(self.keys, args, rounds))

    async def wait(self, timeout: float, *, interrupt: str | None = None) -> bool:
        """Wait up to ``timeout`` seconds for work or ``interrupt`` (no polling); True if woken."""
        command, seconds = self._wait_args(timeout, interrupt)
        return await self.client.execute_blocking(*command, timeout=seconds) is not None

    async def interrupt(self, key: str) -> None:
        """Wake the :meth:`wait` given ``interrupt=key`` (or the next one, within a minute)."""
        command_replies(await self.client.execute_many(self._interrupt_commands(key)), 2, "interrupt")

    # ---- dead letters and stats

    async def dead(self, limit: int = 100, *, older_than: float | None = None) -> list[DeadJob]:
        """The oldest dead-lettered jobs (at most ``limit``), dead for ``older_than`` s or more."""
        args = self._dead_args("list", None, limit, older_than)
        return [] if args is None else dead_jobs(await self.client.call("queue_dead", self.keys, args))

    async def requeue_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Move dead jobs back to ready with their attempts reset; returns how many moved."""
        args = self._dead_args("requeue", ids, limit, older_than)
        return 0 if args is None else dead_count(await self.client.call("queue_dead", self.keys, args))

    async def purge_dead(
        self, ids: Iterable[str] | None = None, *, limit: int = 100, older_than: float | None = None
    ) -> int:
        """Delete dead jobs and their payloads, chosen like :meth:`requeue_dead`."""
        args = self._dead_args("purge", ids, limit, older_than)
        return 0 if args is None else dead_count(await self.client.call("queue_dead", self.keys, args))

    async def stats(self) -> QueueStats:
        """Job counts, read in one round trip."""
        return queue_stats(await self.client.execute_many(self._stats_commands()))

    # ---- admin (bounded per call; see fastlock.queues.admin)

    async def peek(self, state: str = "ready", *, offset: int = 0, count: int = 20) -> admin.Page:
        """Up to ``count`` (≤ 1000) jobs in ``state`` (ready, delayed, active or dead) from
        ``offset``, in the order they will be claimed, expire or were buried."""
        args = admin.peek_args(state, offset, count)
        return admin.page(await self.client.call("queue_peek", self.keys, args), state, offset)

    async def job(self, job_id: str, *, window: int = admin.WINDOW) -> admin.JobInfo:
        """What the server holds about job ``job_id`` (``state`` ``missing`` when nothing),
        searching ``window`` entries at each end of each structure."""
        args = admin.job_args(job_id, window)
        return admin.job_info(await self.client.call("queue_job", self.keys, args), job_id)

    async def cancel(self, job_id: str, *, window: int = admin.WINDOW) -> admin.Cancelled:
        """Remove a ready or delayed job, its payload and its held unique lock, atomically;
        an active (leased) or dead job is refused."""
        args = admin.cancel_args(job_id, window)
        return admin.cancelled(await self.client.call("queue_cancel", self.keys, args))

    async def unique_locks(self, cursor: int = 0, *, count: int = 100) -> tuple[int, list[admin.UniqueLock]]:
        """One HSCAN page of the held unique locks: ``(next cursor, locks)``, 0 ends the walk."""
        return await self.client.run(admin.unique_locks(self.key["unique"], cursor, count))

    async def unique_lock(self, digest: str) -> admin.UniqueLock | None:
        """The unique lock on ``digest`` (held or ttl), or ``None`` when it is free."""
        return await self.client.run(admin.unique_lock(self.key["unique"], self.prefix, digest))

    def __repr__(self) -> str:
        return f"<fastlock.aio.AsyncQueue {self.name!r} lease={self.lease} max_attempts={self.max_attempts}>"
