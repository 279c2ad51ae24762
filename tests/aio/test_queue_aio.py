"""AsyncQueue on real servers (Redis and Valkey, both cores): the scenarios of
tests/queues/test_queue.py that apply, awaited, and a sync queue on the same keys."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import AsyncQueue, AsyncWorker, Client
from fastlock.queues.jobs import QueueStats, Unique

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""


def test_enqueue_claim_complete_and_tokens(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("jobs", lease=5.0)
            assert isinstance(queue, AsyncQueue) and repr(queue).startswith("<fastlock.aio.AsyncQueue")
            first = await queue.enqueue(b"a")
            ids = await queue.enqueue_many([b"b", "c", b"d"])
            assert len(set([first, *ids])) == 4
            jobs = await queue.claim(2)
            assert [j.payload for j in jobs] == [b"a", b"b"] and jobs[0].token < jobs[1].token
            assert await queue.holds(jobs[0])
            nxt = await queue.complete(jobs, claim=5)
            assert [j.payload for j in nxt] == [b"c", b"d"]
            assert await queue.complete(nxt) == [] and await queue.complete([]) == []
            assert await queue.stats() == QueueStats(0, 0, 0, 0)
            batches = await asyncio.gather(*(queue.claim(1) for _ in range(3)))
            assert all(batch == [] for batch in batches)

    run(main())


def test_tasks_claim_each_job_once(run: Run, loop: str, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("many")
            await queue.enqueue_many(b"%d" % i for i in range(1500))  # two enqueue calls
            batches = await asyncio.gather(*(queue.claim(100) for _ in range(20)))
            claimed = [job.payload for batch in batches for job in batch]
            assert sorted(claimed) == sorted(b"%d" % i for i in range(1500))
            tokens = [job.token for batch in batches for job in batch]
            assert len(set(tokens)) == 1500

    run(main())


def test_fail_recover_dead_and_stale_workers(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("q", lease=5.0, max_attempts=2, backoff=0.0)
            await queue.enqueue(b"p")
            [old] = await queue.claim()
            assert await queue.extend([old], lease=0.001) == []
            await asyncio.sleep(0.01)
            assert await queue.recover() == (1, 0, False)
            [new] = await queue.claim()
            assert (new.id, new.attempt) == (old.id, 2) and new.token > old.token
            with pytest.raises(fastlock.LeaseLost):
                await queue.complete(old)
            with pytest.raises(fastlock.LeaseLost):
                await queue.fail(old, "x")
            assert await queue.extend([old, new]) == [old] and old.lost
            assert not await queue.holds(old)
            assert not await queue.fail(new, KeyError("missing"))  # attempts used up: dead
            [dead] = await queue.dead()
            assert (dead.id, dead.attempts, dead.error) == (new.id, 2, "KeyError: 'missing'")
            assert await queue.requeue_dead() == 1
            [again] = await queue.claim()
            assert await queue.fail(again, "retry", retry_in=0.05)
            assert await queue.stats() == QueueStats(ready=0, delayed=1, active=0, dead=0)
            await asyncio.sleep(0.06)
            [last] = await queue.claim()
            await queue.fail(last, "dead", dead=True)
            assert await queue.purge_dead([last.id]) == 1 and await queue.purge_dead([]) == 0
            assert await queue.dead() == [] and await queue.requeue_dead([]) == 0

    run(main())


def test_delays_priorities_uniqueness(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("u")
            await queue.enqueue(b"late", delay=30)  # never due during the test, however slow the machine
            await queue.enqueue(b"p5", priority=5)
            await queue.enqueue(b"p1", priority=1)
            await queue.enqueue(b"plain")
            assert [j.payload for j in await queue.claim(5)] == [b"plain", b"p1", b"p5"]
            empty = await queue.claim()
            assert empty == [] and empty.next_due_in is not None and 25 < empty.next_due_in <= 30
            await queue.enqueue(b"one", unique=Unique("report", args=[1]))
            with pytest.raises(fastlock.DuplicateJob):
                await queue.enqueue(b"two", unique=Unique("report", args=[1]))
            await queue.enqueue(b"x", job_id="fixed")
            with pytest.raises(fastlock.DuplicateJob):
                await queue.enqueue(b"x", job_id="fixed")

    run(main())


def test_wait_blocks_until_signalled_without_blocking_the_loop(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("w")
            start = time.monotonic()
            assert not await queue.wait(0.05)
            assert time.monotonic() - start >= 0.05
            waiting = asyncio.create_task(queue.wait(30))
            ticks = 0
            while ticks < 5:  # the loop runs while the wait blocks on its own connection
                await asyncio.sleep(0.01)
                ticks += 1
            await queue.enqueue(b"wake")
            assert await asyncio.wait_for(waiting, 10)
            key = queue.prefix + "stop:test"
            stopping = asyncio.create_task(queue.wait(30, interrupt=key))
            await asyncio.sleep(0.05)
            await queue.interrupt(key)
            assert await asyncio.wait_for(stopping, 10)

    run(main())


def test_sync_and_async_queues_share_jobs(
    run: Run, redis_url: str, impl: str, client: fastlock.Client
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            aqueue, squeue = aclient.queue("shared"), client.queue("shared")
            assert aqueue.keys == squeue.keys
            await aqueue.enqueue(b"from async")
            squeue.enqueue(b"from sync")
            [a] = squeue.claim()
            [b] = await aqueue.claim()
            assert (a.payload, b.payload) == (b"from async", b"from sync") and b.token > a.token
            await aqueue.complete(a)
            squeue.complete(b)
            assert await aqueue.stats() == squeue.stats() == QueueStats(0, 0, 0, 0)

    run(main())


def test_admin_matches_the_sync_queue(run: Run, redis_url: str, impl: str) -> None:
    """peek, job, cancel and the unique-lock admin, awaited, read what the sync queue reads."""
    sync = fastlock.Client(redis_url, impl=impl)
    sync_queue = sync.queue("admin")
    sync_queue.enqueue(b"now", job_id="now")
    sync_queue.enqueue(b"later", job_id="later", delay=60, unique=Unique("u"))
    digest = sync_queue.unique_digest(Unique("u"))

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("admin")
            page = await queue.peek("ready")
            assert page.total == 1 and [job.id for job in page.jobs] == ["now"]
            assert [job.id for job in (await queue.peek("delayed")).jobs] == ["later"]
            assert (await queue.job("later")) == sync_queue.job("later")
            assert (await queue.job("nope")).state == "missing"
            held = await queue.unique_lock(digest)
            assert held is not None and held.job_id == "later"
            assert (await queue.unique_locks())[1] == [held]
            cancelled = await queue.cancel("later")
            assert cancelled.done and cancelled.state == "delayed"
            assert await queue.unique_lock(digest) is None

    try:
        run(main())
        assert sync_queue.job("later").state == "missing"
    finally:
        sync.close()


def test_pause_and_resume(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("paused")
            await queue.enqueue_many([b"a", b"b"])
            assert await queue.pause() and not await queue.pause()
            batch = await queue.claim(2)
            assert batch == [] and batch.paused
            assert await queue.stats() == QueueStats(2, 0, 0, 0, paused=True)
            with fastlock.Client(redis_url, impl=impl) as sync_client:  # one flag for every client
                assert sync_client.queue("paused").claim(1).paused
            assert await queue.resume() and not await queue.resume()
            assert [job.payload for job in await queue.claim(2)] == [b"a", b"b"]

    run(main())


def test_periodic_jobs_with_async_and_sync_schedulers(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("periodic")
            assert await queue.every(0.05, b"tick", name="fast", catch_up="all")
            assert not await queue.every(0.05, b"tick", name="fast", catch_up="all")
            assert await queue.cron("0 3 * * *", b"n", name="nightly", tz="Europe/Paris")
            with pytest.raises(fastlock.ArgumentError):
                await queue.cron("0 3 * * *", b"n", name="nightly", tz="Europe/Nowhere")
            done = False
            with fastlock.Client(redis_url, impl=impl) as sync_client:
                sync_queue = sync_client.queue("periodic")
                other = asyncio.to_thread(sync_queue.run_schedules, stop=lambda: done, idle=0.05)
                runners = [queue.run_schedules(stop=lambda: done, idle=0.05) for _ in "ab"]
                runners = [asyncio.ensure_future(runner) for runner in [*runners, other]]
                await asyncio.sleep(0.6)
                done = True
                counts = await asyncio.gather(*runners)
            ready = await client.execute("LRANGE", queue.key["ready"], 0, -1)
            ticks = sorted(int(word.decode().rsplit("@", 1)[1]) for word in ready)
            assert sum(counts) == len(ticks) >= 5
            assert ticks == list(range(ticks[0], ticks[-1] + 1, 50))  # each tick once, none missing
            assert [row.name for row in await queue.schedules()] == ["fast", "nightly"]
            assert await queue.unschedule("nightly")
            seen: list[str] = []

            async def handle(job: fastlock.Job) -> None:
                seen.append(job.id)

            await client.execute("DEL", queue.key["ready"])
            assert await AsyncWorker(queue, handle, idle_wait=5).run(max_jobs=2, schedules=True) == 2
            assert len(set(seen)) == 2 and all(job_id.startswith("fast@") for job_id in seen)

    run(main())
