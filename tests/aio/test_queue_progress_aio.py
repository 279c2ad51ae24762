"""Progress on the asyncio transport (both cores): stored, shown, fenced (the sync cases:
tests/queues/test_queue_progress.py)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import Client

Run = Callable[[Coroutine[Any, Any, Any]], Any]


def test_progress_is_stored_and_fenced(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("progress")
            job_id = await queue.enqueue(b"work")
            [job] = await queue.claim()
            await queue.progress(job, {"rows": 120})
            assert (await queue.job(job_id)).progress == {"rows": 120}
            with pytest.raises(fastlock.ArgumentError):
                await queue.progress(job, "x" * 5000)
            await queue.complete(job)
            with pytest.raises(fastlock.LeaseLost):
                await queue.progress(job, {"rows": 121})
            assert job.lost and (await queue.job(job_id)).progress == {"rows": 120}

    run(main())
