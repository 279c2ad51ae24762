"""AsyncLimiter on real servers (Redis and Valkey, both cores): decisions, the waiting acquire
(asyncio.sleep of the server's retry-after), validation before sending, a sync limiter on the
same key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import AsyncLimiter, Client

Run = Callable[[Coroutine[Any, Any, Any]], Any]


@pytest.mark.parametrize("kind", ["gcra", "window"])
def test_decisions_and_waits(run: Run, redis_url: str, impl: str, kind: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            limiter = client.limiter("api", rate=4, per=0.4, kind=kind)
            assert isinstance(limiter, AsyncLimiter)
            assert repr(limiter).startswith("<fastlock.aio.AsyncLimiter 'api'")
            decisions = await asyncio.gather(*(limiter.try_acquire() for _ in range(6)))
            assert sum(d.allowed for d in decisions) == 4
            assert all(0 < d.retry_after <= 0.4 for d in decisions if not d)
            started = time.monotonic()
            assert (await limiter.acquire(timeout=5)).allowed
            assert time.monotonic() - started >= 0.05
            assert not await limiter.acquire(4, timeout=0.01)
            with fastlock.Client(redis_url, impl=impl) as sync_client:  # one limiter, both transports
                assert sync_client.limiter("api", rate=4, per=0.4, kind=kind).try_acquire(4).retry_after > 0
            await limiter.reset()
            assert (await limiter.try_acquire(4)).allowed

    run(main())


def test_bad_arguments_are_refused_before_sending(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            with pytest.raises(fastlock.ArgumentError):
                client.limiter("x", rate=0)
            limiter = client.limiter("x", rate=2)
            with pytest.raises(fastlock.ArgumentError):
                await limiter.try_acquire(3)
            with pytest.raises(fastlock.ArgumentTypeError):
                await limiter.acquire(timeout="soon")  # type: ignore[arg-type]
            assert await client.execute("EXISTS", limiter.key) == 0

    run(main())
