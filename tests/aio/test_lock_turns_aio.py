"""A client's waiters take turns in-process before they contend at the server (``locks/gate.py``,
issue 27): one waiter per lock (per holder of a limit) reaches the server, the others follow it
in their order, each with an uncontended acquire; a turn that is never released lapses with the
lock's ttl; a local waiter that leaves delays nobody; a free lock costs no turn."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.blocking import PATIENCE_RECHECK

import fastlock
from fastlock.aio import AsyncLockManager, Client
from fastlock.locks.notify import MAX_NAP
from fastlock.tools.costs import command_calls

Run = Callable[[Coroutine[Any, Any, Any]], Any]


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("limit", [1, 3])
def test_one_waiter_per_holder_reaches_the_server(run: Run, redis_url: str, impl: str, limit: int) -> None:
    """20 tasks wait on a lock held elsewhere: ``limit`` of them queue on the server, the
    others wait in-process; after the release every one of them holds it in turn (never more
    than ``limit`` at once), first come first served, with no acquire that fails."""
    with fastlock.Client(redis_url, max_connections=1) as probe, fastlock.Client(redis_url) as other:
        blocker = other.lock("turns", ttl=30, limit=limit)
        holders = [f"h{n}" for n in range(limit)]
        assert all(blocker.acquire(h) is not None for h in holders)

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                inside, order = [0], []

                async def waiter(n: int) -> None:
                    lock = client.lock("turns", ttl=30, timeout=20, limit=limit)
                    assert await lock.acquire(f"w{n}") is not None
                    inside[0] += 1
                    assert inside[0] <= limit, "more holders than the limit"
                    order.append(n)
                    await asyncio.sleep(0.002)
                    inside[0] -= 1
                    assert await lock.release(f"w{n}") is not None

                queue = (blocker._main_scope.wake + "q").encode()
                tasks = []
                for n in range(20):
                    tasks.append(asyncio.create_task(waiter(n)))
                    await asyncio.sleep(0.002)
                await _until(lambda: probe.execute("ZCARD", queue) == limit, "the first waiters never queued")
                await asyncio.sleep(client.locks.patience + PATIENCE_RECHECK)  # then a release hands over
                assert probe.execute("ZCARD", queue) == limit  # the others wait in-process
                probe.execute("CONFIG", "RESETSTAT")
                for h in holders:
                    assert blocker.release(h) is not None
                await asyncio.gather(*tasks)
                assert order == sorted(order) if limit == 1 else sorted(order) == list(range(20))
                calls = command_calls(probe)
                # each release, and each acquire but the queued waiters' (handed the lock): no
                # acquire that failed, no message but for the queued ones
                sent = calls["evalsha"] - calls.get("script|load", 0)  # (the blocker's release loads it)
                assert sent == limit + 20 + (20 - limit), calls
                assert calls.get("publish", 0) <= limit, calls

        run(main())


def test_a_turn_never_released_lapses_with_the_lock_ttl(run: Run, redis_url: str, impl: str) -> None:
    """A task takes the lock (ttl 0.3 s) and never releases it: the next local waiter gets in
    when the lock expires, not at the end of its own timeout."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            assert await client.lock("lapse", ttl=0.3, timeout=5).acquire("gone") is not None
            started = time.monotonic()
            assert await client.lock("lapse", ttl=30, timeout=5).acquire("next") is not None
            assert 0.25 < time.monotonic() - started < 0.3 + MAX_NAP

    run(main())


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
def test_a_local_waiter_that_leaves_delays_nobody(run: Run, redis_url: str, impl: str, how: str) -> None:
    """Waiters a (queued on the server), b and c (in-process): b leaves (cancelled, or by its
    own timeout, without waiting for a); the release hands the lock to a, and a's release to
    c at once."""
    with fastlock.Client(redis_url) as other:
        blocker = other.lock("leave-turn", ttl=30)
        assert blocker.acquire("holder") is not None

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:

                def wait(job: str, timeout: float = 20) -> asyncio.Task[int | None]:
                    lock = client.lock("leave-turn", ttl=30, timeout=timeout)
                    return asyncio.create_task(lock.acquire(job))

                a = wait("a")
                await asyncio.sleep(0.05)
                b = wait("b", 0.3 if how == "timed out" else 20)
                c = wait("c")
                await asyncio.sleep(0.05)
                started = time.monotonic()
                if how == "cancelled":
                    b.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await b
                else:
                    assert await b is None
                    assert time.monotonic() - started < 0.3 + MAX_NAP / 2
                assert not a.done() and not c.done()
                assert blocker.release("holder") is not None
                assert await a is not None
                released = time.monotonic()
                assert await client.lock("leave-turn", ttl=30).release("a") is not None
                assert await c is not None
                assert time.monotonic() - released < MAX_NAP / 2

        run(main())


def test_the_server_queue_alone_without_a_local_queue(run: Run, redis_url: str, impl: str) -> None:
    """``local_queue=False``: every waiter of the client queues on the server."""
    with fastlock.Client(redis_url, max_connections=1) as probe, fastlock.Client(redis_url) as other:
        blocker = other.lock("no-turns", ttl=30)
        assert blocker.acquire("holder") is not None

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                locks = AsyncLockManager(client, local_queue=False)
                assert locks.gate is None and client.locks.gate is not None

                async def waiter(n: int) -> None:
                    lock = locks.lock("no-turns", ttl=30, timeout=20)
                    assert await lock.acquire(f"w{n}") is not None
                    assert await lock.release(f"w{n}") is not None

                tasks = [asyncio.create_task(waiter(n)) for n in range(3)]
                queue = (blocker._main_scope.wake + "q").encode()
                await _until(lambda: probe.execute("ZCARD", queue) == 3, "the waiters never queued")
                assert blocker.release("holder") is not None
                await asyncio.gather(*tasks)

        run(main())


def test_threads_take_turns(redis_url: str, impl: str) -> None:
    """A sync client's manager (the local queue on by default, as for asyncio): 8 threads on one
    lock, one of them at a time on the server, every lifecycle done with never two holders."""
    with (
        fastlock.Client(redis_url, impl=impl) as client,
        fastlock.Client(redis_url, max_connections=1) as probe,
    ):
        locks = client.locks
        free = locks.lock("thread-turns", ttl=30, timeout=5)
        assert free.acquire("free") is not None
        assert locks.gate is not None and locks.gate.turns == {}  # a free lock costs no turn
        assert free.release("free") is not None
        inside, failures, peak = [0], [], [0]
        queue = (locks.lock("thread-turns", ttl=30)._bind().wake + "q").encode()

        def worker(n: int) -> None:
            try:
                for i in range(10):
                    lock = locks.lock("thread-turns", ttl=30, timeout=20)
                    assert lock.acquire(f"t{n}-{i}") is not None
                    inside[0] += 1
                    assert inside[0] == 1, "two holders"
                    peak[0] = max(peak[0], probe.execute("ZCARD", queue))
                    inside[0] -= 1
                    assert lock.release(f"t{n}-{i}") is not None
            except BaseException as exc:  # noqa: BLE001 - reaches the test below
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)
        assert not failures, failures[:3]
        assert peak[0] <= 1  # the holder's turn, and at most one waiter queued on the server
        assert locks.gate is not None and locks.gate.turns == {}


def test_a_release_by_another_client_reaches_the_local_waiters(run: Run, redis_url: str, impl: str) -> None:
    """A task holds the lock (and its turn); another client releases it with the job id: the
    local waiter behind it gets the lock within a nap, not at the lock's ttl."""
    with fastlock.Client(redis_url) as other:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                assert await client.lock("elsewhere", ttl=30, timeout=5).acquire("j") is not None
                waiting = asyncio.create_task(client.lock("elsewhere", ttl=30, timeout=10).acquire("w"))
                await asyncio.sleep(0.05)
                released = time.monotonic()
                assert other.lock("elsewhere", ttl=30).release("j") is not None
                assert await waiting is not None
                assert time.monotonic() - released < MAX_NAP + 0.5

        run(main())
