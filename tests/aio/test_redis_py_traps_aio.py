"""The asyncio traps of a user coming from redis-py's ``Lock`` (issue 23), on real servers and
both cores: a lock's ttl is a required choice; the default holder is the task that *calls*
``acquire``/``release``/``extend``, so a call run in another task (``asyncio.wait_for`` on
Python 3.11, ``create_task``) acts for its caller; a release from a task that holds nothing
while another task holds the lock through the same object is refused, saying what to do."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import AsyncLock, Client

Run = Callable[[Coroutine[Any, Any, Any]], Any]


def test_an_async_lock_without_ttl_is_refused(impl: str) -> None:
    client = Client("redis://127.0.0.1:1", impl=impl)  # nothing connects
    for build in (lambda: client.lock("report"), lambda: client.locks.lock("report", timeout=10)):
        with pytest.raises(fastlock.ArgumentError, match=re.escape("ttl=None")):
            build()
    with pytest.raises(fastlock.ArgumentError, match="ttl=None"):
        AsyncLock(client.locks, client.locks.digest("report"), "report")
    assert client.lock("report", ttl=None).ttl is None


def test_wait_for_and_tasks_act_for_the_task_that_called(run: Run, redis_url: str, impl: str) -> None:
    """``wait_for(lock.acquire(), 1)`` (another task on 3.11) and ``create_task(...)`` take the
    lock for the calling task: its own ``release()`` frees it."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("waited", ttl=30)
            token = await asyncio.wait_for(lock.acquire(), 1)
            assert token is not None and [h.job_id for h in await lock.holders()] == [lock.job_id]
            assert await lock.extend(ttl=60) == token
            assert await lock.release() == token and not await lock.locked()
            token = await asyncio.create_task(lock.acquire())
            assert token is not None and await asyncio.wait_for(lock.release(), 1) == token
            assert not await lock.locked()

            async def elsewhere() -> int | None:  # a task of its own: its own holder
                return await lock.acquire()

            mine = await lock.acquire()
            assert mine is not None and await asyncio.create_task(elsewhere()) is None
            assert await lock.release() == mine

    run(main())


def test_a_release_from_another_task_is_refused_while_the_lock_is_held(
    run: Run, redis_url: str, impl: str
) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("handed", ttl=30)
            acquired = asyncio.Event()
            done = asyncio.Event()

            async def holder() -> int | None:
                assert await lock.acquire() is not None
                acquired.set()
                await done.wait()
                return await lock.release()

            task = asyncio.create_task(holder())
            await acquired.wait()
            with pytest.raises(fastlock.LockNotOwnedError, match=r"another task.*job_id") as caught:
                await lock.release()
            assert isinstance(caught.value, fastlock.FastlockError)
            assert await lock.locked()  # still held by the task that took it
            done.set()
            assert await task is not None and not await lock.locked()
            assert await lock.release() is None  # nobody holds it: nothing to refuse
            # the documented hand-over: a job id, one holder in every task
            shared = client.lock("handed", ttl=30, job_id="job-1")
            assert await asyncio.create_task(shared.acquire()) is not None
            assert await shared.release() is not None

    run(main())


def test_a_release_after_the_other_task_s_lock_expired_frees_nothing(
    run: Run, redis_url: str, impl: str
) -> None:
    """Only a lock still held by another task is refused: once its slot expired, None."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("expired", ttl=0.05)
            assert await asyncio.create_task(_acquire_in_own_task(lock)) is not None
            await asyncio.sleep(0.08)
            assert await lock.release() is None

    run(main())


async def _acquire_in_own_task(lock: AsyncLock) -> int | None:
    return await lock.acquire()


def test_a_task_whose_own_lock_was_lost_is_told_so(run: Run, redis_url: str, impl: str) -> None:
    """The refusal is for a task that took nothing: one whose own lock expired (and another task
    of the same object took it) gets the lost-lock error of ``async with``, and a body's own
    exception is not replaced."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            lock = client.lock("lost", ttl=30)
            entered, go_on = asyncio.Event(), asyncio.Event()

            async def slow(fail: bool) -> None:
                async with lock:
                    entered.set()
                    await go_on.wait()
                    if fail:
                        raise KeyError("the body's own error")

            for fail, error in ((False, fastlock.LockNotOwnedError), (True, KeyError)):
                entered.clear()
                go_on.clear()
                task = asyncio.create_task(slow(fail))
                await entered.wait()
                await client.execute("DEL", *lock._main_scope.slots)  # the slow task's slot expired
                taken = await lock.acquire()
                assert taken is not None
                go_on.set()
                with pytest.raises(error, match="lost before release" if not fail else "own error"):
                    await task
                assert await lock.release() == taken

    run(main())
