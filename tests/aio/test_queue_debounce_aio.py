"""Debounce and replace on the asyncio transport (both cores): 8 producer tasks replacing one
unique job while worker tasks claim it, and the refusal of a claimed job (the sync cases:
tests/queues/test_queue_debounce.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.size import sized

import fastlock
from fastlock.aio import Client
from fastlock.queues.jobs import QueueStats

Run = Callable[[Coroutine[Any, Any, Any]], Any]
REPLACEMENTS = sized(10_000, 400, "FASTLOCK_DEBOUNCE_REPLACEMENTS")
PRODUCERS = 8


def test_replace_and_extend_a_waiting_job(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("debounce")
            first = await queue.enqueue(b"v1", unique="u", delay=60)
            assert await queue.enqueue(b"v2", unique="u", delay=60, on_duplicate="replace") == first
            assert await queue.enqueue(b"v3", unique="u", delay=90, on_duplicate="extend") == first
            info = await queue.job(first)
            assert info.preview == b"v2" and info.state == "delayed"
            assert await queue.enqueue(b"v4", unique="u", on_duplicate="replace") == first
            [job] = await queue.claim()
            assert job.payload == b"v4"
            with pytest.raises(fastlock.DuplicateJob) as refused:
                await queue.enqueue(b"v5", unique="u", on_duplicate="replace")
            assert refused.value.job_id == first and await queue.holds(job)

    run(main())


def test_producer_tasks_replacing_one_job_while_workers_claim(run: Run, redis_url: str, impl: str) -> None:
    accepted: dict[str, set[bytes]] = {}
    claims: list[tuple[str, bytes]] = []

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("debounce", lease=30.0)
            done = asyncio.Event()

            async def produce(n: int) -> None:
                for i in range(REPLACEMENTS // PRODUCERS):
                    payload = b"%d-%d" % (n, i)
                    try:
                        job_id = await queue.enqueue(
                            payload, unique="one", delay=0.001 * (i % 3), on_duplicate="replace"
                        )
                    except fastlock.DuplicateJob:
                        continue  # claimed meanwhile: refused
                    accepted.setdefault(job_id, set()).add(payload)

            async def work() -> None:
                while not done.is_set() or await queue.stats() != QueueStats(0, 0, 0, 0):
                    batch = await queue.claim()
                    if not batch:
                        await asyncio.sleep(0.001)
                        continue
                    [job] = batch
                    claims.append((job.id, job.payload))
                    # held until complete: no other job of the lock waits or runs
                    assert await queue.stats() == QueueStats(ready=0, delayed=0, active=1, dead=0)
                    await queue.complete(job)

            workers = [asyncio.create_task(work()) for _ in range(2)]
            await asyncio.gather(*(produce(n) for n in range(PRODUCERS)))
            done.set()
            await asyncio.wait_for(asyncio.gather(*workers), 60)

    run(main())
    assert claims, "no job was claimed"
    ids = [job_id for job_id, _ in claims]
    assert len(ids) == len(set(ids)), "a job id claimed twice"
    for job_id, payload in claims:
        assert payload in accepted[job_id], (job_id, payload)
    assert sum(len(p) for p in accepted.values()) > len(claims)
