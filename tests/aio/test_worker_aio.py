"""AsyncWorker on real servers (Redis and Valkey, both cores): the scenarios of
tests/queues/test_worker.py that apply (batches, max_jobs, retries and dead letters,
heartbeat, lost leases, idle waits without polling, recovery), plus concurrency as tasks
and the graceful stop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.blocking import wait_until_blocked

import fastlock
import fastlock.queues.outcomes
from fastlock.aio import AsyncQueue, AsyncWorker, Client
from fastlock.queues.jobs import Job, QueueStats
from fastlock.testing.servers import TempServer, free_port
from fastlock.tools.costs import command_calls

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""

IDLE_WAIT = 60.0
WOKEN_WITHIN = IDLE_WAIT / 2


async def settle(queue: AsyncQueue, expected: QueueStats, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while await queue.stats() != expected:
        assert time.monotonic() < deadline, await queue.stats()
        await asyncio.sleep(0.02)


def test_batches_and_max_jobs(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("w")
            await queue.enqueue_many(b"%d" % i for i in range(35))
            seen: list[bytes] = []

            async def handler(job: Job) -> None:
                seen.append(job.payload)

            assert await AsyncWorker(queue, handler, batch=10).run(max_jobs=30) == 30
            assert seen == [b"%d" % i for i in range(30)]
            assert await queue.stats() == QueueStats(ready=5, delayed=0, active=0, dead=0)
            several = AsyncWorker(queue, handler, batch=2, concurrency=4)
            assert await several.run(max_jobs=3) == 3  # the budget is shared by the tasks
            assert (await queue.stats()).ready == 2
            with pytest.raises(fastlock.ArgumentTypeError):
                AsyncWorker(fastlock.Client(redis_url).queue("w"), handler)  # type: ignore[arg-type]

    run(main())


def test_failing_handler_retries_then_dead_letters(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("w", max_attempts=3, backoff=lambda attempt: 0.05 * attempt)
            await queue.enqueue(b"bad")
            attempts: list[tuple[int, float]] = []

            async def handler(job: Job) -> None:
                attempts.append((job.attempt, time.monotonic()))
                raise KeyError("missing")

            assert await AsyncWorker(queue, handler, idle_wait=1.0).run(max_jobs=3) == 3
            assert [a for a, _ in attempts] == [1, 2, 3]
            assert attempts[1][1] - attempts[0][1] >= 0.05 and attempts[2][1] - attempts[1][1] >= 0.1
            [dead] = await queue.dead()
            assert (dead.attempts, dead.error.split("\n")[0]) == (3, "KeyError: 'missing'")
            assert 'in handler\n    raise KeyError("missing")' in dead.error  # the traceback is kept

    run(main())


def test_concurrency_runs_handlers_as_tasks_and_stop_drains(
    run: Run, loop: str, redis_url: str, impl: str
) -> None:
    """8 tasks handle slow jobs side by side; stop() lets each finish its batch, and run()
    returns with nothing left active."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("c", lease=5.0)
            await queue.enqueue_many([b"x"] * 200)
            running = most = 0
            handled: list[str] = []

            async def handler(job: Job) -> None:
                nonlocal running, most
                running += 1
                most = max(most, running)
                await asyncio.sleep(0.01)
                handled.append(job.id)
                running -= 1

            worker = AsyncWorker(queue, handler, batch=2, concurrency=8)
            task = asyncio.create_task(worker.run())
            while len(handled) < 20:
                await asyncio.sleep(0.005)
            await worker.stop()
            count = await asyncio.wait_for(task, 30)
            assert most == 8 and count == len(handled) == len(set(handled))
            stats = await queue.stats()
            assert stats.active == 0 and stats.ready == 200 - count

    run(main())


@pytest.mark.slow  # slow tier: a job outliving leases
def test_heartbeat_keeps_a_long_job_leased_and_flags_a_lost_one(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("h", lease=1.5)
            await queue.enqueue(b"slow")
            recovered = []

            async def slow(job: Job) -> None:
                deadline = time.monotonic() + 3.2  # > 2 leases; someone keeps trying to recover
                while time.monotonic() < deadline:
                    recovered.append(await queue.recover())
                    await asyncio.sleep(0.05)
                assert not job.lost

            assert await AsyncWorker(queue, slow).run(max_jobs=1) == 1
            assert all(r.requeued == r.dead == 0 for r in recovered)
            assert await queue.stats() == QueueStats(0, 0, 0, 0)

            short = client.queue("l", lease=0.3)
            await short.enqueue(b"x")
            flags: list[bool] = []

            async def taken_back(job: Job) -> None:
                await short.extend([job], lease=0.001)
                await asyncio.sleep(0.01)
                await short.recover()  # someone took the job back: the next heartbeat notices
                deadline = time.monotonic() + 30
                while not job.lost and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                flags.append(job.lost)

            await AsyncWorker(short, taken_back).run(max_jobs=1)
            assert flags == [True] and (await short.stats()).ready == 1

    run(main())


def test_idle_worker_blocks_without_polling_and_wakes(
    run: Run, loop: str, redis_url: str, impl: str, client: fastlock.Client
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            queue = aclient.queue("i", lease=60)
            done = asyncio.Event()

            async def handler(job: Job) -> None:
                done.set()

            worker = AsyncWorker(queue, handler, idle_wait=IDLE_WAIT, concurrency=2)
            task = asyncio.create_task(worker.run())
            await asyncio.to_thread(wait_until_blocked, client, "bzpopmin", None, 2)
            client.execute("CONFIG", "RESETSTAT")
            await asyncio.sleep(1.0)
            idle = command_calls(client)
            assert idle.get("evalsha", 0) == 0 and idle.get("bzpopmin", 0) == 0, idle
            client.queue("i").enqueue(b"wake up")  # a sync producer
            await asyncio.wait_for(done.wait(), WOKEN_WITHIN)
            started = time.monotonic()
            await worker.stop()  # both idle loops are woken at once
            assert await asyncio.wait_for(task, WOKEN_WITHIN) == 1
            assert time.monotonic() - started < WOKEN_WITHIN

    run(main())


def test_workers_recover_abandoned_jobs_with_sync_workers_alongside(
    run: Run, redis_url: str, impl: str
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("r", lease=0.2)
            await queue.enqueue_many([b"a", b"b"])
            abandoned = await queue.claim(2)  # a worker that died holding them

            async def handler(job: Job) -> None:
                pass

            worker = AsyncWorker(queue, handler, idle_wait=0.2)
            task = asyncio.create_task(worker.run())
            await settle(queue, QueueStats(0, 0, 0, 0))
            with pytest.raises(fastlock.LeaseLost):
                await queue.complete(abandoned)
            await worker.stop()
            assert await asyncio.wait_for(task, 10) == 2

    run(main())


def test_script_errors_that_are_not_transient_are_raised(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("e")
            await client.execute("SET", queue.key["ready"], "not a list")

            async def handler(job: Job) -> None:
                pass

            with pytest.raises(fastlock.LuaCommandError) as info:
                await AsyncWorker(queue, handler, idle_wait=0.1).run(max_jobs=1)
            assert info.value.code == "WRONGTYPE"

    run(main())


FAULTS = {
    "readonly": (("REPLICAOF", "127.0.0.1", "{port}"), ("REPLICAOF", "NO", "ONE")),
    "oom": (("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),
}
CODES = {"readonly": "READONLY", "oom": "OOM"}


@pytest.mark.slow  # slow tier: a fault held for a while
@pytest.mark.fault
@pytest.mark.parametrize("fault", FAULTS)
def test_worker_waits_out_a_readonly_or_full_server(
    run: Run, private_server: TempServer, impl: str, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The sync worker's transient-error policy, awaited: the fault is waited out with few
    warnings, then every job is handled."""

    async def main() -> None:
        async with Client(private_server.url, impl=impl) as client:
            queue = client.queue("w", lease=0.3)
            ids = await queue.enqueue_many([b"x"] * 20)
            handled: list[str] = []

            async def handler(job: Job) -> None:
                handled.append(job.id)
                await asyncio.sleep(0.04)  # a batch of 5 outlasts half a lease: renewed between jobs

            worker = AsyncWorker(queue, handler, batch=5, idle_wait=0.2, concurrency=2)
            start, end = FAULTS[fault]
            private_server.raw_command(*(str(free_port()) if a == "{port}" else a for a in start))
            caplog.set_level(logging.WARNING, "fastlock.worker")
            task = asyncio.create_task(worker.run())
            await asyncio.sleep(1.5)
            assert not task.done()
            assert private_server.raw_command(*end) == b"+OK\r\n"
            await settle(queue, QueueStats(0, 0, 0, 0), timeout=10)
            await worker.stop()
            await asyncio.wait_for(task, 10)
            assert set(handled) == set(ids)
            trouble = [r.getMessage() for r in caplog.records if CODES[fault] in r.getMessage()]
            assert 1 <= len(trouble) <= 6, trouble  # each loop's and the heartbeat's, rate-limited

    run(main())


def test_job_timeout_cancels_the_handler(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("t", max_attempts=2, backoff=0.01)
            hung = await queue.enqueue(b"hang")
            cancelled: list[int] = []

            async def handler(job: Job) -> None:
                if job.payload == b"hang":
                    try:
                        await asyncio.sleep(30)
                    except asyncio.CancelledError:
                        cancelled.append(job.attempt)
                        raise
                raise TimeoutError("the handler's own timeout stays its own")

            await queue.enqueue(b"own")
            started = time.monotonic()
            assert await AsyncWorker(queue, handler, job_timeout=0.2, idle_wait=0.5).run(max_jobs=3) == 3
            assert time.monotonic() - started < 10 and cancelled == [1, 2]
            dead = {job.id: job for job in await queue.dead()}
            assert dead[hung].error.startswith("JobTimeout: job ")
            stats = await queue.stats()  # "own" failed with its TimeoutError, waits for its retry
            assert list(dead) == [hung] and stats.ready + stats.delayed == 1

    run(main())


def test_hooks_retry_dead_letter_and_burst(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("h", max_attempts=3)
            plain, retried, buried = [await queue.enqueue(p) for p in (b"ok", b"retry", b"bury")]
            events: list[tuple[str, str, int]] = []

            def hook(name: str) -> Any:
                async def awaited(job: Job, exc: BaseException | None = None) -> None:
                    await asyncio.sleep(0)
                    events.append((name, job.id, job.attempt))

                return awaited

            async def handler(job: Job) -> None:
                if job.payload == b"retry" and job.attempt == 1:
                    raise fastlock.queues.outcomes.Retry(in_=0.1)
                if job.payload == b"bury":
                    raise fastlock.queues.outcomes.DeadLetter("no")

            hooks = {name: hook(name) for name in ("before", "after", "on_failure", "on_retry")}
            worker = AsyncWorker(queue, handler, burst=True, idle_wait=1.0, concurrency=2, **hooks)
            assert await worker.run() == 4  # burst: returns once empty, the retry included
            assert ("after", plain, 1) in events and ("after", retried, 2) in events
            assert ("on_retry", retried, 1) in events and ("on_failure", buried, 1) in events
            assert len([e for e in events if e[0] == "before"]) == 4
            [dead] = await queue.dead()
            assert (dead.id, dead.error) == (buried, "no")
            assert await queue.stats() == QueueStats(0, 0, 0, 1)

    run(main())


def test_stop_and_signals_hand_the_unstarted_batch_back(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            queue = client.queue("g", lease=30)
            await queue.enqueue_many([b"x"] * 40)
            started: list[float] = []

            async def handler(job: Job) -> None:
                started.append(time.monotonic())
                await asyncio.sleep(0.2)

            for how in ("stop", "SIGTERM", "SIGINT"):
                worker = AsyncWorker(queue, handler, batch=10, concurrency=2)
                task = asyncio.create_task(worker.run(install_signals=True))
                while len(started) < 2:
                    await asyncio.sleep(0.005)
                signalled = time.monotonic()
                if how == "stop":
                    await worker.stop()
                else:
                    os.kill(os.getpid(), getattr(signal, how))
                assert await asyncio.wait_for(task, 10) == 2
                drain = time.monotonic() - signalled
                assert drain < 5.0, drain  # the current jobs' rest (< 0.2 s) and two calls
                stats = await queue.stats()
                assert stats.active == 0 and stats.ready == 38  # 2 done, 18 handed back
                claimed = await queue.claim(40)
                assert all(job.attempt == 1 for job in claimed)  # handed back: no attempt spent
                await queue.release(claimed)
                await queue.enqueue_many([b"x"] * 2)
                started.clear()
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored

    run(main())


def test_a_paused_worker_naps_and_resume_wakes_it(
    run: Run, redis_url: str, impl: str, client: fastlock.Client
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            queue = aclient.queue("paused", lease=60)
            await queue.pause()
            done = asyncio.Event()

            async def handler(job: Job) -> None:
                done.set()

            worker = AsyncWorker(queue, handler, idle_wait=0.05)  # unpaused, it would ask 20 times a second
            task = asyncio.create_task(worker.run())
            await asyncio.to_thread(wait_until_blocked, client, "bzpopmin")
            await queue.enqueue(b"job")
            client.execute("CONFIG", "RESETSTAT")
            await asyncio.sleep(1.0)
            idle = command_calls(client)
            assert idle.get("evalsha", 0) == 0 and idle.get("bzpopmin", 0) == 0, idle
            assert not done.is_set()
            client.queue("paused").resume()  # a sync admin
            await asyncio.wait_for(done.wait(), WOKEN_WITHIN)  # woken, not at the nap's end
            await worker.stop()
            assert await asyncio.wait_for(task, WOKEN_WITHIN) == 1

    run(main())
