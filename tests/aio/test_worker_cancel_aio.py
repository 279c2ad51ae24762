"""Cancelling a running job under a real AsyncWorker (both cores): the heartbeat task sees the
cancel, the handler stops at its next check, and the job ends as cancelled, never retried nor
dead-lettered (the sync worker: tests/queues/test_queue_cancel_running.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import AsyncWorker, Client
from fastlock.queues.admin import Cancelled
from fastlock.queues.jobs import Job, QueueStats

Run = Callable[[Coroutine[Any, Any, Any]], Any]
EMPTY = QueueStats(ready=0, delayed=0, active=0, dead=0)


@pytest.mark.parametrize("check", ["raise_if_cancelled", "holds"])
def test_an_async_worker_stops_a_cancelled_handler(run: Run, redis_url: str, impl: str, check: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("cancel", lease=0.9, max_attempts=3, backoff=0.0)
            job_id = await queue.enqueue(b"long")
            started, stopped, hooks = asyncio.Event(), [], []

            async def handler(job: Job) -> None:
                started.set()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    if check == "holds":
                        if not await queue.holds(job):
                            stopped.append(job.cancelled)
                            return
                    else:
                        try:
                            job.raise_if_cancelled()
                        except fastlock.JobCancelled:
                            stopped.append(job.cancelled)
                            raise
                    await asyncio.sleep(0.01)

            async def cancel() -> None:
                await started.wait()
                assert await queue.cancel(job_id) == Cancelled(True, "active")

            worker = AsyncWorker(
                queue, handler, on_failure=hooks.append, on_retry=hooks.append, after=hooks.append
            )
            began = time.monotonic()
            handled, _ = await asyncio.wait_for(asyncio.gather(worker.run(max_jobs=1), cancel()), 15)
            assert handled == 1 and stopped == [True] and time.monotonic() - began < 10
            assert hooks == [] and await queue.stats() == EMPTY and await queue.dead() == []
            assert (await queue.job(job_id)).state == "cancelled"

    run(main())


def test_job_timeout_still_applies(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("cancel", lease=0.9, max_attempts=3, backoff=0.0)
            job_id = await queue.enqueue(b"stuck")
            started, failures, seen = asyncio.Event(), [], []

            async def handler(job: Job) -> None:
                seen.append(job)
                started.set()
                await asyncio.sleep(20)  # never checks

            async def cancel() -> None:
                await started.wait()
                assert (await queue.cancel(job_id)).done

            worker = AsyncWorker(
                queue, handler, job_timeout=1.2, on_failure=failures.append, on_retry=failures.append
            )
            handled, _ = await asyncio.wait_for(asyncio.gather(worker.run(max_jobs=1), cancel()), 15)
            assert handled == 1 and failures == [] and seen[0].cancelled  # the heartbeat saw it
            assert await queue.stats() == EMPTY and await queue.dead() == []

    run(main())
