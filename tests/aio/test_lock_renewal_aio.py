"""The lock watchdog on asyncio (``renew=True``), both cores: one renewing task per client and
loop keeps every held lock past its ttl, stops at the release, and tells a lost lock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastlock.aio import Client
from fastlock.aio.manager import AsyncLockManager
from fastlock.aio.renewing import AsyncRenewingLock
from fastlock.locks.renewal import async_renewer

Run = Callable[[Coroutine[Any, Any, Any]], Any]
TTL = 0.3
KEPT_TTL = 1.0  # a lock kept past its ttl: periods of 1/3 s, late rounds on a loaded machine tolerated


def _renewers() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == "fastlock-lock-renewer"]


def test_one_task_renews_every_held_lock_until_released(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            manager = AsyncLockManager(client, buckets=4)  # several cluster slots: one call each
            locks = [manager.lock(f"many:{n}", ttl=KEPT_TTL, renew=True) for n in range(200)]
            assert all(isinstance(lock, AsyncRenewingLock) for lock in locks)
            tokens = await asyncio.gather(*(lock.acquire() for lock in locks))
            assert None not in tokens
            await asyncio.sleep(KEPT_TTL * 1.5)
            assert len(_renewers()) == 1 and not any(lock.lost for lock in locks)
            slots = [lock._main_scope.slots[0] for lock in locks]
            assert await client.execute("EXISTS", *slots) == 200
            assert None not in await asyncio.gather(*(lock.release() for lock in locks))
            assert async_renewer(client).renewals.wait() is None
            for _ in range(100):
                if not _renewers():
                    break
                await asyncio.sleep(0.01)
            assert _renewers() == []  # nothing held: the task ended

    run(main())


def test_a_lost_lock_is_told_and_its_release_frees_nothing(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("deleted", ttl=TTL, renew=True)
            async with lock:
                await client.execute("DEL", *lock._main_scope.slots)  # behind the holder's back
                other = client.lock("deleted", ttl=30)
                assert await other.acquire("other") is not None
                await asyncio.sleep(TTL)
                assert lock.lost
                assert await lock.release() is None
                assert await lock.acquire() is None  # the other holds it
                assert [h.job_id for h in await other.holders()] == ["other"]
                await other.release("other")
                assert await lock.acquire() is not None and not lock.lost

    run(main())
