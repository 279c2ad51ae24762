"""AsyncRWLock on real servers (Redis and Valkey, both cores): tasks sharing one lock are
distinct holders; readers together and a writer alone (server-side counters inside the critical
section); waits woken by a release on the client's listener without polling, from a sync
process's release too; a cancelled or timed-out writer holds no reader back; arguments checked
before anything is sent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.blocking import wait_until_listening
from harness.size import sized

import fastlock
from fastlock.aio import AsyncRWLock, AsyncRWSide, Client
from fastlock.locks.notify import MAX_NAP
from fastlock.tools.costs import command_calls

Run = Callable[[Coroutine[Any, Any, Any]], Any]
PROMPT = MAX_NAP / 2  # woken by the release, not by a re-check


def test_tasks_read_together_and_write_alone(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            rw = client.rwlock("doc", ttl=30, timeout=10)
            assert isinstance(rw, AsyncRWLock) and isinstance(rw.read, AsyncRWSide)
            assert repr(rw) == "<fastlock.aio.AsyncRWLock 'doc' ttl=30 timeout=10>"
            inside = asyncio.Barrier(5)

            async def reader() -> int:
                async with rw.read as token:
                    await asyncio.wait_for(inside.wait(), 5)  # all five hold it at once
                    return token

            tokens = await asyncio.gather(*(reader() for _ in range(5)))
            assert len(set(tokens)) == 5  # five holders: one per task
            turns, state, bad = sized(20, 8), "doc-state", []

            async def worker(n: int) -> None:
                for i in range(turns):
                    if (n + i) % 3 == 0:
                        async with rw.write:
                            writers = await client.execute("HINCRBY", state, "w", 1)
                            readers = int(await client.execute("HGET", state, "r") or 0)
                            if writers != 1 or readers:
                                bad.append(("writer beside", writers, readers))
                            await asyncio.sleep(0)
                            await client.execute("HINCRBY", state, "w", -1)
                    else:
                        async with rw.read:
                            await client.execute("HINCRBY", state, "r", 1)
                            if int(await client.execute("HGET", state, "w") or 0):
                                bad.append(("reader beside a writer", n, i))
                            await asyncio.sleep(0.001)
                            await client.execute("HINCRBY", state, "r", -1)

            await asyncio.gather(*(worker(n) for n in range(8)))
            assert bad == []

    run(main())


def test_the_holder_is_the_calling_task(run: Run, redis_url: str, impl: str) -> None:
    """The holder is resolved at the call: ``wait_for`` and ``create_task`` of the coroutine
    (run in a task of their own) act for the caller, whose release frees it; a call made in
    another task is another holder."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            rw = client.rwlock("tasks", ttl=30)
            token = await asyncio.wait_for(rw.write.acquire(), 1)
            assert token is not None and [h.job_id for h in await rw.write.holders()] == [rw.write.job_id]
            assert await asyncio.create_task(rw.write.acquire()) == token  # the caller's, again

            async def other() -> int | None:
                return await rw.write.acquire()

            assert await asyncio.create_task(other()) is None  # another task: refused
            assert await rw.write.release() == token

    run(main())


def test_a_sync_release_wakes_async_readers_without_polling(run: Run, redis_url: str, impl: str) -> None:
    with fastlock.Client(redis_url) as sync_client:
        writer = sync_client.rwlock("mixed", ttl=30)
        assert writer.write.acquire("w") is not None

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                rw = client.rwlock("mixed", ttl=30, timeout=5)
                readers = [asyncio.create_task(rw.read.acquire(f"r{n}")) for n in range(4)]
                await asyncio.to_thread(wait_until_listening, sync_client)
                await asyncio.sleep(0.05)  # each has tried once more, and sleeps
                sync_client.execute("CONFIG", "RESETSTAT")
                await asyncio.sleep(0.3)
                assert "evalsha" not in command_calls(sync_client)  # nobody polls
                released = time.monotonic()
                assert writer.write.release("w") is not None
                tokens = await asyncio.gather(*readers)
                assert None not in tokens and time.monotonic() - released < PROMPT
                calls = command_calls(sync_client)
                # the release (its script loaded first) and the four attempts it woke
                assert calls["evalsha"] - calls.get("script|load", 0) == 1 + 4, calls
                assert calls["publish"] == 1, calls

        run(main())


def test_a_cancelled_or_timed_out_writer_holds_no_reader_back(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            rw = client.rwlock("gone", ttl=30, timeout=5)
            assert await rw.read.acquire("r1") is not None
            waiting = asyncio.create_task(rw.write.acquire("w"))
            await asyncio.sleep(0.1)
            assert await rw.read.acquire("r2", timeout=0) is None  # writer preference
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await asyncio.sleep(0.05)  # the listener's leaving call
            assert await rw.read.acquire("r2", timeout=0) is not None
            started = time.monotonic()
            assert await rw.write.acquire("w", timeout=0.1) is None
            assert await rw.read.acquire("r3", timeout=0) is not None  # it left at its deadline
            assert time.monotonic() - started < 0.1 + PROMPT
            assert await client.execute("EXISTS", rw.keys[4]) == 0

    run(main())


def test_bad_arguments_send_nothing(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            await client.execute("CONFIG", "RESETSTAT")
            with pytest.raises(fastlock.ArgumentError, match="ttl=<seconds>"):
                client.rwlock("x")  # type: ignore[call-arg]
            with pytest.raises(fastlock.ArgumentTypeError):
                client.rwlock("x", ttl=5, timeout="1")  # type: ignore[arg-type]
            rw = client.rwlock("x", ttl=5)
            with pytest.raises(fastlock.ArgumentError):
                rw.read.acquire(timeout=-1)  # raised at the call: no coroutine made
            with pytest.raises(fastlock.ArgumentTypeError):
                rw.write.release(b"job")  # type: ignore[arg-type]
            with fastlock.Client(redis_url) as probe:
                assert command_calls(probe) == {}

    run(main())
