"""fastlock.compat.redis_py.AsyncLock against redis-py's ``redis.asyncio`` Lock: the same
scenario gives the same outcomes on both (real servers, both cores); where redis-py's asyncio
lock keeps one token per *thread* (tasks share it), the adapter's holder is the calling task."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis.asyncio
import redis.exceptions

import fastlock
from fastlock.aio import Client
from fastlock.compat.redis_py import AsyncLock

Run = Callable[[Coroutine[Any, Any, Any]], Any]
SUBJECTS = ["redis-py", "cython", "python"]


@asynccontextmanager
async def subject(kind: str, url: str) -> AsyncIterator[tuple[Callable[..., Any], Callable[[Any], Any]]]:
    """(make a lock, its time left) for redis-py's asyncio Lock or the adapter on a core."""
    if kind == "redis-py":
        r = redis.asyncio.Redis.from_url(url)

        async def pttl(lock: Any) -> float | None:
            left = await r.pttl(lock.name)
            return None if left == -1 else left / 1000

        try:
            yield (lambda name, **kw: r.lock(name, **kw)), pttl
        finally:
            await r.aclose()
        return
    if kind == "cython":
        pytest.importorskip("fastlock._core")
    async with Client(url, impl=kind) as client:

        async def left(lock: Any) -> float | None:
            return (await lock.lock.holders())[0].ttl

        yield (lambda name, **kw: AsyncLock(client, name, **kw)), left


async def outcome(call: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    try:
        return await call()
    except (redis.exceptions.LockNotOwnedError, fastlock.LockNotOwnedError):
        return "LockNotOwnedError"
    except (redis.exceptions.LockError, fastlock.LockError):
        return "LockError"


@pytest.mark.parametrize("kind", SUBJECTS)
def test_the_async_adapter_behaves_as_redis_py_s(run: Run, redis_url: str, kind: str) -> None:
    async def main() -> list[Any]:
        async with subject(kind, redis_url) as (make, left):
            a, b = make("k", timeout=10), make("k", timeout=10)
            seen = [
                await outcome(lambda: a.acquire(blocking=False)),
                await outcome(lambda: b.acquire(blocking_timeout=0.05)),
                (await a.owned(), await b.locked()),
                await outcome(lambda: a.extend(5)),
                math.ceil(await left(a) or 0),
                await outcome(lambda: a.extend(3, replace_ttl=True)),
                math.ceil(await left(a) or 0),
                await outcome(a.reacquire),
                await outcome(a.release),
                await outcome(a.release),
            ]
            async with b as entered:
                seen.append((entered is b, await b.owned()))
            seen.append(await b.locked())
            forever = make("n")
            seen += [await forever.acquire(), await left(forever), await outcome(lambda: forever.extend(1))]
            await forever.release()
            return seen

    assert run(main()) == [
        True, False, (True, True), True, 15, True, 3, True, None, "LockError", (True, True), False,
        True, None, "LockError",
    ]  # fmt: skip


@pytest.mark.parametrize("impl", ["cython", "python"])
def test_the_async_adapter_s_holder_is_the_calling_task(run: Run, redis_url: str, impl: str) -> None:
    """``wait_for(lock.acquire(), 1)`` (another task on Python 3.11) acquires for the caller;
    another task cannot release it (redis-py's asyncio lock would let it: one token per
    thread), unless ``thread_local=False`` makes one holder of every task."""
    if impl == "cython":
        pytest.importorskip("fastlock._core")

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = AsyncLock(client, "tasks", timeout=10)
            assert await asyncio.wait_for(lock.acquire(), 1) and await lock.owned()
            assert await asyncio.create_task(outcome(lock.release)) == "LockError"
            assert await lock.locked() and await asyncio.wait_for(lock.release(), 1) is None
            shared = AsyncLock(client, "tasks", timeout=10, thread_local=False)
            assert await asyncio.create_task(shared.acquire())
            assert await shared.release() is None and not await shared.locked()

    run(main())
