"""Waiters under contention on one asyncio client (issue 27): they sleep on the client's one
wake-up listener, never on a connection of their own, and a cancelled one leaves nobody asleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.blocking import wait_until_subscribed
from harness.size import sized

import fastlock
from fastlock.aio import Client
from fastlock.locks.notify import MAX_NAP

Run = Callable[[Coroutine[Any, Any, Any]], Any]

WAITERS = sized(1000, 300, "FASTLOCK_AIO_WAITERS")


def _clients(probe: fastlock.Client) -> int:
    info = probe.execute("INFO", "clients").decode()
    return int(
        next(line for line in info.splitlines() if line.startswith("connected_clients:")).split(":")[1]
    )


def test_a_thousand_waiters_cost_one_connection_and_all_get_the_lock(
    run: Run, redis_url: str, impl: str
) -> None:
    """WAITERS tasks wait on one held lock: the server sees the pool's connections and the
    listener, no more; after the release each waiter takes the lock in turn by its own timeout
    (never a PoolTimeoutError), with one holder at a time."""
    with fastlock.Client(redis_url, max_connections=1) as probe:
        baseline = _clients(probe)  # the probe itself

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                holder = client.lock("hot", ttl=30)
                assert await holder.acquire("holder") is not None
                inside: list[int] = [0]
                tokens: list[Any] = []

                async def waiter(n: int) -> None:
                    lock = client.lock("hot", ttl=30, timeout=20)
                    token = await lock.acquire(f"w{n}")
                    assert token is not None
                    inside[0] += 1
                    assert inside[0] == 1, "two holders"
                    await asyncio.sleep(0)
                    inside[0] -= 1
                    tokens.append(token)
                    assert await lock.release(f"w{n}") == token

                tasks = [asyncio.create_task(waiter(n)) for n in range(WAITERS)]
                await asyncio.to_thread(wait_until_subscribed, probe)
                await asyncio.sleep(0.2)  # every task has made its attempt and sleeps
                assert not any(task.done() for task in tasks)
                peak = _clients(probe) - baseline
                assert peak <= client.pool.max_connections + 1, peak
                released = time.monotonic()
                assert await holder.release("holder") is not None
                assert time.monotonic() - released < 0.5  # the release is not queued behind waiters
                await asyncio.gather(*tasks)
                assert len(set(tokens)) == WAITERS  # each its own fencing token

        run(main())


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
def test_a_waiter_that_leaves_does_not_delay_the_next(run: Run, redis_url: str, impl: str, how: str) -> None:
    """The first waiter leaves (cancelled, or by its own timeout) just as the release wakes
    it: the wake-up passes on, and the second waiter holds the lock well within MAX_NAP."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            holder = client.lock("leave", ttl=30)
            assert await holder.acquire("holder") is not None
            first = asyncio.create_task(
                client.lock("leave", ttl=30, timeout=0.3 if how == "timed out" else 20).acquire("a")
            )
            await asyncio.sleep(0.05)
            second = asyncio.create_task(client.lock("leave", ttl=30, timeout=20).acquire("b"))
            await asyncio.sleep(0.05)
            if how == "cancelled":
                first.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await first
            else:
                assert await first is None
            released = time.monotonic()
            assert await holder.release("holder") is not None
            assert await second is not None
            assert time.monotonic() - released < MAX_NAP / 2

    run(main())
