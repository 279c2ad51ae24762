"""AsyncLock, AsyncLockManager and AsyncReaper on real servers, both cores: the scenarios of
tests/locks/ that apply, awaited, with tasks and with a sync client on the same locks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.blocking import wait_until_subscribed

import fastlock
from fastlock import LockConflictError, LockError, LockNotOwnedError
from fastlock.aio import AsyncLock, AsyncLockManager, AsyncReaper, Client
from fastlock.locks.conflict import AsyncConflict
from fastlock.locks.waiting import MAX_BLOCK

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""

WOKEN_WITHIN = MAX_BLOCK / 2  # a waiter woken by the release, not by the safety net


class Boom(Exception):
    pass


async def boom() -> None:
    raise Boom


def test_acquire_release_extend_and_tokens(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("report", args=[1], ttl=30)
            assert isinstance(lock, AsyncLock) and isinstance(client.locks, AsyncLockManager)
            first = await lock.acquire("a")
            assert first is not None and await lock.acquire("a") == first
            assert await lock.acquire("b") is None
            assert await lock.locked()
            assert await lock.extend("a", ttl=60) == first
            [holder] = await lock.holders()
            assert (holder.job_id, holder.token) == ("a", first) and 59 < (holder.ttl or 0) <= 60
            assert await lock.release("a") == first and await lock.release("a") is None
            second = await lock.acquire("b")
            assert second is not None and second > first
            info = await lock.info()
            assert [h.job_id for h in info.holders] == ["b"] and info.runtime_holders == []
            with pytest.raises(LockError):
                await lock.acquire("c", blocking=True)

    run(main())


def test_async_with_excludes_tasks_sharing_one_object(run: Run, loop: str, redis_url: str, impl: str) -> None:
    """Each task is its own default holder: 20 tasks on one object never overlap, and each
    token is larger than the one before."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("shared", ttl=30, timeout=30)
            inside, most, tokens = 0, 0, []

            async def task() -> None:
                nonlocal inside, most
                async with lock as token:
                    inside += 1
                    most = max(most, inside)
                    tokens.append(token)
                    await asyncio.sleep(0.005)
                    inside -= 1

            await asyncio.gather(*(task() for _ in range(20)))
            assert most == 1 and len(tokens) == 20 and tokens == sorted(tokens)
            assert len(set(tokens)) == 20 and not await lock.locked()
            with pytest.raises(LockNotOwnedError):
                async with lock:
                    await client.locks.delete(lock.digest)

    run(main())


def test_a_sync_holder_wakes_an_async_waiter_without_polling(
    run: Run, loop: str, redis_url: str, impl: str, client: fastlock.Client
) -> None:
    """The async waiter sleeps on its client's listener (subscribed, on the server's account)
    and the sync release wakes it."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            holder = client.lock("wake", ttl=300)
            held = holder.acquire("sync")
            assert held is not None
            waiter = aclient.lock("wake", ttl=300, timeout=300)
            waiting = asyncio.create_task(waiter.acquire("async"))
            await asyncio.to_thread(wait_until_subscribed, client)
            assert not waiting.done()
            released = time.monotonic()
            await asyncio.to_thread(holder.release, "sync")
            token = await asyncio.wait_for(waiting, 2 * MAX_BLOCK)
            assert time.monotonic() - released < WOKEN_WITHIN
            assert token is not None and token > held
            assert holder.acquire("sync") is None  # the async holder excludes the sync client
            assert await waiter.release("async") == token

    run(main())


def test_a_waiter_times_out_and_expiry_wakes_it(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            await client.lock("busy", ttl=300).acquire("h")
            waiter = client.lock("busy", ttl=300)
            start = time.monotonic()
            assert await waiter.acquire("w", timeout=0.2) is None
            assert 0.2 <= time.monotonic() - start < WOKEN_WITHIN
            await client.lock("exp", ttl=0.2).acquire("h")
            start = time.monotonic()
            assert await client.lock("exp", ttl=30).acquire("w", timeout=30) is not None
            assert time.monotonic() - start < WOKEN_WITHIN

    run(main())


def test_until_executed_and_until_executing(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            producer, worker = (client.lock("job", ttl=30) for _ in range(2))
            assert await producer.enqueue("1") and not await producer.enqueue("2")

            async def body() -> list[str]:
                return [h.job_id for h in await worker.holders()]

            assert await worker.execute("1", body) == ["1"]  # held while it runs
            assert not await worker.locked()  # released after success
            assert await producer.enqueue("3")
            with pytest.raises(Boom):
                await worker.execute("3", boom)
            assert [h.job_id for h in await worker.holders()] == ["3"]  # kept on failure
            await client.locks.delete(worker.digest)

            producer, worker = (client.lock("early", type="until_executing", ttl=30) for _ in range(2))
            assert await producer.enqueue("1")

            async def running() -> bool:
                return await producer.enqueue("2")  # released before the job ran

            assert await worker.execute("1", running) is True
            await producer.release("2")
            assert await producer.enqueue("4")
            with pytest.raises(Boom):
                await worker.execute("4", boom)
            assert [h.job_id for h in await worker.holders()] == ["4"]  # re-locked

    run(main())


def test_while_executing_types(run: Run, redis_url: str, impl: str, client: fastlock.Client) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            worker = aclient.lock("run", type="while_executing", ttl=30, timeout=30)
            assert await worker.enqueue("1")  # no queue-time lock
            order: list[str] = []

            async def job(name: str) -> str:
                order.append(f"{name} in")
                await asyncio.sleep(0.05)
                order.append(f"{name} out")
                return name

            results = await asyncio.gather(
                *(worker.execute(str(i), lambda i=i: job(str(i))) for i in range(3))
            )
            assert results == ["0", "1", "2"] and len(order) == 6
            assert all(order[i].endswith("in") and order[i + 1].endswith("out") for i in range(0, 6, 2))
            assert not await worker.locked()

            rejecting = aclient.lock("run", type="while_executing_reject", ttl=30)
            sync_holder = client.lock("run", type="while_executing", ttl=30)
            assert sync_holder.acquire("sync") is not None
            with pytest.raises(LockError, match="needs a job framework"):
                await rejecting.execute("2", lambda: job("2"))
            sync_holder.release("sync")

            both = aclient.lock(
                "both", type="until_and_while_executing", ttl=30, on_conflict={"execute": "raise"}
            )
            assert await both.enqueue("1") and not await both.enqueue("2")

            async def swapped() -> tuple[bool, list[str]]:
                return await both.enqueue("2"), [h.job_id for h in (await both.info()).runtime_holders]

            assert await both.execute("1", swapped) == (True, ["1"])
            with pytest.raises(Boom):
                await both.execute("2", boom)
            assert [h.job_id for h in await both.holders()] == ["2"]

    run(main())


def test_strategies_sync_async_and_replace(
    run: Run, redis_url: str, impl: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            await client.lock("s", ttl=30).acquire("old")
            with caplog.at_level("INFO", logger="fastlock.lock"):
                assert not await client.lock("s", ttl=30, on_conflict="log").enqueue("new")
            assert "skipping job new" in caplog.text
            with pytest.raises(LockConflictError):
                await client.lock("s", ttl=30, on_conflict="raise").enqueue("new")
            seen: list[AsyncConflict] = []
            assert not await client.lock("s", ttl=30, on_conflict=seen.append).enqueue("new", job={"id": 1})
            assert (
                isinstance(seen[0], AsyncConflict)
                and seen[0].holders == ("old",)
                and seen[0].job == {"id": 1}
            )

            async def evict_then_retry(conflict: AsyncConflict) -> int | None:
                await conflict.evict("old")
                return await conflict.retry()

            assert await client.lock("s", ttl=30, on_conflict=evict_then_retry).enqueue("mine")
            replacing = client.lock("s", ttl=30, on_conflict={"enqueue": "replace"})
            assert await replacing.enqueue("new")
            assert [h.job_id for h in await replacing.holders()] == ["new"]

    run(main())


def test_admin_and_reaper(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            locks = AsyncLockManager(client, prefix="adm", buckets=4, max_history=100)
            digests = []
            for i in range(5):
                lock = locks.lock("thing", args=[i], ttl=30, limit=2)
                await lock.acquire(f"j{i}")
                digests.append(lock.digest)
            entries = [entry async for entry in locks.entries(count=2)]
            assert sorted(e.digest for e in entries) == sorted(digests) and {e.limit for e in entries} == {2}
            assert await locks.limit_of(digests[0]) == 2
            assert [h.job_id for h in await locks.inspect(digests[0])] == ["j0"]
            assert [e.event for e in await locks.changelog(digests[0])] == ["locked"]
            assert await locks.delete(digests[0]) == 1
            cursor, removed = "0", 0
            while True:
                cursor, count = await locks.delete_matching(f"{digests[1][:8]}*", cursor)
                removed += count
                if cursor == "0":
                    break
            assert removed == 1
            await locks.lock("gone", ttl=0.05).acquire("x")
            await asyncio.sleep(0.1)
            reaper = locks.reaper(batch=100)
            assert isinstance(reaper, AsyncReaper)
            result = await reaper.run_once()
            assert result is not None and result.dropped == 1 and result.released == 0
            task = reaper.start()
            await asyncio.sleep(0.05)
            await reaper.stop()
            assert task.done()
            with pytest.raises(RuntimeError):
                reaper.start()
                reaper.start()
            await reaper.stop()

    run(main())


def test_locks_are_shared_with_sync_clients(
    run: Run, redis_url: str, impl: str, client: fastlock.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Same default namespace, digests and keys: a lock taken on one side is seen on the other."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            alock = aclient.lock("both", args=[1], ttl=30)
            slock = client.lock("both", args=[1], ttl=30)
            assert alock.digest == slock.digest and repr(alock).startswith("<fastlock.AsyncLock")
            token = await alock.acquire("a")
            assert slock.acquire("b", blocking=False) is None and slock.release("a") == token
            assert await alock.acquire("b") is not None
            with caplog.at_level(logging.WARNING, logger="fastlock.lock"):
                producer = aclient.lock("lost", ttl=30)
                assert await producer.enqueue("1")

                async def deleted() -> None:
                    client.locks.delete(producer.digest)

                await producer.execute("1", deleted)
            assert "finished without holding lock" in caplog.text

    run(main())


def test_default_holders_differ_per_task_and_stay_within_one(run: Run, redis_url: str) -> None:
    async def main() -> None:
        async with Client(redis_url) as client:
            lock = client.lock("ids", ttl=None)
            mine = lock.job_id
            assert lock.job_id == mine

            async def holder() -> str:
                return lock.job_id

            others = await asyncio.gather(*(holder() for _ in range(3)))  # each its own task
            assert len({mine, *others}) == 4
            assert client.lock("ids", job_id="fixed", ttl=None).job_id == "fixed"

    run(main())


def test_sync_threads_and_async_tasks_exclude_each_other(
    run: Run, redis_url: str, impl: str, client: fastlock.Client
) -> None:
    """A read-modify-write of one key under one lock, from 3 threads (sync client) and 10
    tasks (async client) at once: no increment is lost, tokens never repeat."""
    tokens: list[int] = []

    def sync_side() -> None:
        with fastlock.Client(redis_url, impl=impl) as own:
            lock = own.lock("counter", ttl=30, timeout=60)
            for _ in range(10):
                with lock as token:
                    tokens.append(token)
                    value = int(own.execute("GET", "n") or 0)
                    own.execute("SET", "n", value + 1)

    async def main() -> None:
        async with Client(redis_url, impl=impl) as aclient:
            lock = aclient.lock("counter", ttl=30, timeout=60)

            async def task() -> None:
                for _ in range(10):
                    async with lock as token:
                        tokens.append(token)
                        value = int(await aclient.execute("GET", "n") or 0)
                        await asyncio.sleep(0)
                        await aclient.execute("SET", "n", value + 1)

            threads = [asyncio.to_thread(sync_side) for _ in range(3)]
            await asyncio.gather(*threads, *(task() for _ in range(10)))

    run(main())
    assert client.execute("GET", "n") == b"130"
    assert len(set(tokens)) == 130


def test_an_unknown_lock_option_is_refused_before_anything_is_sent(
    run: Run, redis_url: str, impl: str
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            for build in (client.lock, client.locks.lock, AsyncLockManager(client, prefix="other").lock):
                with pytest.raises(
                    fastlock.UnknownOptionError, match=r"'ttll' \(did you mean 'ttl'\?\)"
                ) as info:
                    build("job", ttl=30, ttll=5)
                assert isinstance(info.value, fastlock.ArgumentError) and isinstance(info.value, TypeError)
            with pytest.raises(
                fastlock.UnknownOptionError,
                match=r"the lock options are job_id, limit, name, on_conflict, renew, timeout, ttl, type$",
            ):
                AsyncLock(client.locks, "ab" * 16, "job", ttl=30, ttll=5)
            assert client.pool.connections == []  # nothing was sent: no connection was even opened

    run(main())
