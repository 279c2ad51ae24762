"""Waiters under contention on one asyncio client (issue 27): they sleep on the client's one
wake-up listener, never on a connection of their own, and a cancelled one leaves nobody asleep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import redis
from harness.blocking import PATIENCE_RECHECK, next_message, wait_until_subscribed
from harness.size import sized

import fastlock
from fastlock.aio import AsyncLockManager, Client
from fastlock.locks.notify import MAX_NAP
from fastlock.tools.costs import command_calls

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
                # not queued behind the waiters for a connection (that waits for the pool's
                # timeout, then raises); the bound is far above a loaded machine's release
                assert time.monotonic() - released < 2.5  # half the pool's default timeout
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


def test_a_waiter_cancelled_in_its_first_attempt_leaves_no_trace(run: Run, redis_url: str, impl: str) -> None:
    """A waiter that joins the waiters of its channel (no I/O) and is cancelled while its first
    attempt, the one that queues it, is in flight (the server paused) leaves the listener, and
    its release takes it off the queue: the lock goes to the waiter that stayed, nothing is left."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                holder = client.lock("gone", ttl=30)
                assert await holder.acquire("holder") is not None
                assert holder._main_scope is not None
                wake = holder._main_scope.wake
                queue, channel = (wake + "q").encode(), client.listener.channel(wake)
                first = asyncio.create_task(client.lock("gone", ttl=30, timeout=20).acquire("a"))
                deadline = time.monotonic() + 10
                # its conflict queues it, then it subscribes: wait for the confirmation too
                while not (probe.execute("ZCARD", queue) and client.listener.joins(channel)):
                    assert time.monotonic() < deadline, "the first waiter never queued and listened"
                    await asyncio.sleep(0.005)
                assert probe.execute("CLIENT", "PAUSE", 10_000, "WRITE") == b"OK"
                try:
                    second = asyncio.create_task(client.lock("gone", ttl=30, timeout=20).acquire("b"))
                    await asyncio.sleep(0.05)  # it joins and sends its attempt, which waits
                    assert not second.done()
                    second.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await second
                    assert client.listener.joins(channel)  # the first waiter is still there
                finally:
                    probe.execute("CLIENT", "UNPAUSE")
                left = time.monotonic() + MAX_NAP / 2  # (a queued member lives 3 s: not waited out)
                while probe.execute("ZCARD", queue) != 1:  # the attempt ran, then the release
                    assert time.monotonic() < left, "the cancelled waiter stayed queued"
                    await asyncio.sleep(0.005)
                released = time.monotonic()
                assert await holder.release("holder") is not None
                assert await first is not None
                assert time.monotonic() - released < MAX_NAP / 2
                assert await client.lock("gone", ttl=30).release("a") is not None
                assert not client.listener.joins(channel)
                assert not probe.execute("ZCARD", queue)
                assert not await holder.locked()

        run(main())


def test_a_wait_on_a_free_lock_costs_what_an_attempt_costs(run: Run, redis_url: str, impl: str) -> None:
    """An acquire with a timeout that finds the lock free sends what one without a timeout
    sends (the same commands, one round trip each way) and never opens the listener."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def lifecycles(client: Client, timeout: float) -> tuple[dict[str, int], int]:
            lock = client.lock("free", ttl=30, timeout=timeout)
            assert await lock.acquire("warm") is not None  # scripts loaded, eviction checked
            assert await lock.release("warm") is not None
            probe.execute("CONFIG", "RESETSTAT")
            writes = client.pool.writes
            for n in range(20):
                assert await lock.acquire(f"j{n}") is not None
                assert await lock.release(f"j{n}") is not None
            return command_calls(probe), client.pool.writes - writes

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                baseline = _clients(probe)
                assert await lifecycles(client, 5.0) == await lifecycles(client, 0.0)
                assert _clients(probe) == baseline + client.pool.opened  # and no listener
                assert not probe.execute("PUBSUB", "CHANNELS")

        run(main())


def test_a_second_waiter_awaits_the_first_ones_subscription(run: Run, redis_url: str, impl: str) -> None:
    """Two waiters enter one channel at once: neither is back before the server has
    confirmed the subscription (a release in between would otherwise be missed)."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                listener = client.listener
                first = asyncio.create_task(listener.listen(b"two-waiters"))
                await asyncio.sleep(0)  # the first has sent its SUBSCRIBE (or is connecting)
                second = await listener.listen(b"two-waiters")
                assert probe.execute("PUBSUB", "CHANNELS", "two-waiters") == [b"two-waiters"]
                listener.leave(b"two-waiters", second)
                listener.leave(b"two-waiters", await first)

        run(main())


def test_a_handshake_refused_reaches_the_waiter(run: Run, redis_url: str, impl: str) -> None:
    """The listener's AUTH fails (the password changed after the pool connected): the
    waiter gets the server's error, not a silent fallback to re-checks."""
    user = f"listener-{time.monotonic_ns()}"
    with fastlock.Client(redis_url, max_connections=1) as admin:
        admin.execute("ACL", "SETUSER", user, "on", ">first", "~*", "&*", "+@all")
        try:

            async def main() -> None:
                async with Client(redis_url, impl=impl, username=user, password="first") as client:
                    holder = client.lock("refused", ttl=30)
                    assert await holder.acquire("holder") is not None  # the pool is connected
                    admin.execute("ACL", "SETUSER", user, "resetpass", ">second")
                    with pytest.raises(fastlock.AuthenticationError):
                        await client.lock("refused", ttl=30, timeout=2).acquire("waiter")
                    assert await holder.release("holder") is not None

            run(main())
        finally:
            admin.execute("ACL", "DELUSER", user)


async def _queued(probe: fastlock.Client, lock: Any, count: int) -> None:
    """Until ``count`` waiters of ``lock`` are queued for a hand-over, and their patience has
    run out (a release hands them the lock then)."""
    queue = (lock._main_scope.wake + "q").encode()
    deadline = time.monotonic() + 10
    while probe.execute("ZCARD", queue) < count:
        assert time.monotonic() < deadline, "the waiters never queued"
        await asyncio.sleep(0.005)
    if lock.manager.patience:
        await asyncio.sleep(lock.manager.patience + PATIENCE_RECHECK)


def test_a_release_hands_the_lock_over_in_one_step(run: Run, redis_url: str, impl: str) -> None:
    """A release with a queued waiter gives it the lock inside the release script: the
    waiter returns the new fencing token with no acquire attempt of its own after it."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                holder = client.lock("handed", ttl=30)
                assert await holder.acquire("holder") is not None
                waiter = client.lock("handed", ttl=30, timeout=10)
                taking = asyncio.create_task(waiter.acquire("waiter"))
                await _queued(probe, holder, 1)
                assert await holder.release("nobody") is None  # the release script is loaded
                probe.execute("CONFIG", "RESETSTAT")
                freed = await holder.release("holder")
                token = await taking
                assert freed is not None and token is not None and token > freed
                calls = command_calls(probe)
                # the release, no second attempt (a script reloaded by another test: re-sent once)
                assert calls["evalsha"] - calls.get("script|load", 0) == 1, calls
                assert [h.job_id for h in await holder.holders()] == ["waiter"]
                assert await waiter.release("waiter") == token

        run(main())


def test_a_hand_over_message_read_late_reaches_no_later_wait(run: Run, redis_url: str, impl: str) -> None:
    """The message of an earlier wait of a job, read late, is not taken by the job's next
    wait as the token of a lock it holds (each wait has an id of its own)."""
    with (
        fastlock.Client(redis_url, max_connections=1) as probe,
        redis.Redis.from_url(redis_url) as spy,
        spy.pubsub() as heard,
    ):

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                holder = client.lock("late", ttl=30)
                assert await holder.acquire("holder") is not None
                channel = client.listener.channel(holder._main_scope.wake)
                heard.subscribe(channel)
                taking = asyncio.create_task(client.lock("late", ttl=30, timeout=10).acquire("w"))
                await _queued(probe, holder, 1)
                assert await holder.release("holder") is not None  # handed over to "w"
                token = await taking
                message = next_message(heard)
                assert token is not None and await holder.release("w") == token
                assert await holder.acquire("holder") is not None
                taking = asyncio.create_task(client.lock("late", ttl=30, timeout=1.5).acquire("w"))
                await _queued(probe, holder, 1)
                probe.execute("PUBLISH", channel, message)  # the earlier wait's message, late
                assert await taking is None  # timed out: "holder" holds it all along
                assert [h.job_id for h in await holder.holders()] == ["holder"]

        run(main())


@pytest.mark.parametrize("local", [False, True], ids=["server", "local"])
def test_queued_waiters_get_the_lock_in_their_order(run: Run, redis_url: str, impl: str, local: bool) -> None:
    """Waiters queued one after another are handed the lock first come, first served, and
    a caller arriving meanwhile queues behind them (the lock is never free in between): on the
    server (each waiter queued there: no local queue), and in the client's local queue."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                locks = AsyncLockManager(client, local_queue=local)
                holder = locks.lock("order", ttl=30)
                assert await holder.acquire("holder") is not None
                order: list[str] = []

                async def waiter(name: str) -> None:
                    lock = locks.lock("order", ttl=30, timeout=10)
                    assert await lock.acquire(name) is not None
                    order.append(name)
                    await asyncio.sleep(0.01)
                    assert await lock.release(name) is not None

                tasks = []
                for n, name in enumerate("abcde"):
                    tasks.append(asyncio.create_task(waiter(name)))
                    await _queued(probe, holder, 1 if local else n + 1)
                assert await holder.release("holder") is not None
                late = asyncio.create_task(waiter("late"))
                await asyncio.gather(*tasks, late)
                assert order == [*"abcde", "late"]

        run(main())


@pytest.mark.parametrize("how", ["cancelled", "timed out"])
def test_a_release_racing_a_leaving_waiter_leaves_no_lock_held_by_nobody(
    run: Run, redis_url: str, impl: str, how: str
) -> None:
    """The release hands the lock to a waiter just as it times out or is cancelled, at many
    offsets: that waiter either returns the token or holds nothing after it left, and the
    next waiter always gets the lock."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                # each release hands the lock over to a waiter queued on the server
                locks = AsyncLockManager(client, patience=0, local_queue=False)
                for trial in range(12):
                    name = f"race-{how}-{trial}"
                    holder = locks.lock(name, ttl=30)
                    assert await holder.acquire("holder") is not None
                    wait = 0.2
                    leaving = locks.lock(name, ttl=30, timeout=wait if how == "timed out" else 10)
                    first = asyncio.create_task(leaving.acquire("first"))
                    await _queued(probe, holder, 1)
                    second = asyncio.create_task(locks.lock(name, ttl=30, timeout=10).acquire("second"))
                    await _queued(probe, holder, 2)
                    started = time.monotonic()
                    await asyncio.sleep(max(0.0, wait - 0.05 + trial * 0.008 - (time.monotonic() - started)))
                    if how == "cancelled":
                        first.cancel()
                    assert await holder.release("holder") is not None
                    try:
                        got = await first
                    except asyncio.CancelledError:
                        got = None
                    if got is not None:  # it took the lock in time: it hands it on itself
                        assert await leaving.release("first") == got
                    assert await asyncio.wait_for(second, 5) is not None, "the lock went to nobody"
                    assert [h.job_id for h in await holder.holders()] == ["second"]
                    assert await locks.lock(name, ttl=30).release("second") is not None

        run(main())


@pytest.mark.parametrize("fair", [False, True], ids=["barging", "fair"])
def test_a_free_lock_with_a_queued_waiter_barging_or_fair(
    run: Run, redis_url: str, impl: str, fair: bool
) -> None:
    """The holder's slot vanishes without a release (as at its expiry) while a waiter is
    queued: by default a new caller takes the free lock (barging); with ``fair=True`` it is
    refused, and the queued waiter takes the lock at its next re-check."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                manager = fastlock.aio.AsyncLockManager(client, prefix=f"fair{int(fair)}", fair=fair)
                holder = manager.lock("gap", ttl=30)
                assert await holder.acquire("holder") is not None
                waiting = asyncio.create_task(manager.lock("gap", ttl=30, timeout=10).acquire("queued"))
                await _queued(probe, holder, 1)
                probe.execute("DEL", holder._main_scope.slots[0])  # gone without a release
                newcomer = manager.lock("gap", ttl=30)
                taken = await newcomer.acquire("newcomer")
                if fair:
                    assert taken is None
                    assert await asyncio.wait_for(waiting, MAX_NAP * 3) is not None
                    assert [h.job_id for h in await holder.holders()] == ["queued"]
                else:
                    assert taken is not None
                    assert not waiting.done()
                    assert await newcomer.release("newcomer") == taken
                    # handed over if the waiter's re-check flagged the newcomer's slot, else taken
                    # by that waiter at its next re-check
                    assert await asyncio.wait_for(waiting, MAX_NAP * 3) is not None

        run(main())


def test_the_channel_names_the_db(run: Run, redis_url: str, impl: str) -> None:
    """A waiter on db 1 listens on ``<wake key>@1`` (pub/sub ignores databases: db 0's
    releases of the same name publish on ``@0``) and is handed the lock there."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl, db=1) as client:
                holder = client.lock("db-channel", ttl=30)
                assert await holder.acquire("holder") is not None
                taking = asyncio.create_task(client.lock("db-channel", ttl=30, timeout=10).acquire("w"))
                wake = holder._main_scope.wake
                deadline = time.monotonic() + 10
                while not probe.execute("PUBSUB", "CHANNELS", f"{wake}@*"):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.005)
                assert probe.execute("PUBSUB", "CHANNELS", f"{wake}@*") == [f"{wake}@1".encode()]
                freed = await holder.release("holder")
                assert freed is not None and (await asyncio.wait_for(taking, MAX_NAP / 2) or 0) > freed

        run(main())


def test_a_limit_lock_hands_each_freed_slot_over(run: Run, redis_url: str, impl: str) -> None:
    """limit=3, twelve waiters: never more than three inside, each waiter served."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            inside, most, served = [0], [0], []

            async def worker(n: int) -> None:
                lock = client.lock("limited", ttl=30, timeout=10, limit=3)
                token = await lock.acquire(f"j{n}")
                assert token is not None
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                await asyncio.sleep(0.01)
                inside[0] -= 1
                served.append(n)
                assert await lock.release(f"j{n}") == token

            await asyncio.gather(*(worker(n) for n in range(12)))
            assert sorted(served) == list(range(12)) and most[0] == 3

    run(main())


@pytest.mark.parametrize("kind", ["while_executing", "until_and_while_executing"])
def test_a_runtime_wait_is_handed_the_lock(run: Run, redis_url: str, impl: str, kind: str) -> None:
    """A job waiting for the runtime lock (the until_and_while_executing one after its
    queue-time swap) queues and is handed the lock by the running job's release; so is a job
    that starts while others wait (it joins them first), and its start frees its queue-time lock."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                locks = AsyncLockManager(client, local_queue=False)  # every waiter queues on the server
                lock = locks.lock("runtime-wait", type=kind, ttl=30, timeout=10)
                order: list[str] = []
                gate = asyncio.Event()

                async def first() -> str:
                    order.append("1 in")
                    await gate.wait()
                    order.append("1 out")
                    return "1"

                async def second() -> str:
                    order.append("2 in")
                    return "2"

                async def third() -> str:
                    order.append("3 in")
                    return "3"

                assert await lock.enqueue("1")
                running = asyncio.create_task(lock.execute("1", first))
                while not order:
                    await asyncio.sleep(0.005)
                assert await lock.enqueue("2")  # (until_and_while_executing: the queue lock is free)
                waiting = asyncio.create_task(lock.execute("2", second))
                queue = (lock._runtime.wake + "q").encode()
                deadline = time.monotonic() + 10
                while not probe.execute("ZCARD", queue):
                    assert time.monotonic() < deadline, "the runtime waiter never queued"
                    await asyncio.sleep(0.005)
                # a third job starts while the second waits: its start is the swap all the same
                # (it does not join the waiters first), so its queue-time lock is freed and a
                # fourth job of the digest is enqueued
                assert await lock.enqueue("3")
                joining = asyncio.create_task(lock.execute("3", third))
                while probe.execute("ZCARD", queue) < 2:
                    assert time.monotonic() < deadline, "the third job never queued"
                    await asyncio.sleep(0.005)
                assert await lock.enqueue("4")
                gate.set()
                released = time.monotonic()
                assert await running == "1" and await waiting == "2" and await joining == "3"
                assert time.monotonic() - released < MAX_NAP / 2
                assert order == ["1 in", "1 out", "2 in", "3 in"]
                assert (await lock.release("4") is not None) == (kind == "until_and_while_executing")
                assert not await lock.locked()

        run(main())


def test_a_delete_hands_the_lock_to_a_queued_waiter(run: Run, redis_url: str, impl: str) -> None:
    """``locks.delete`` (whoever holds the lock) hands the freed slot to the queued waiter."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                manager = fastlock.aio.AsyncLockManager(client)
                holder = manager.lock("deleted", ttl=30)
                assert await holder.acquire("holder") is not None
                taking = asyncio.create_task(manager.lock("deleted", ttl=30, timeout=10).acquire("w"))
                await _queued(probe, holder, 1)
                deleted = time.monotonic()
                assert await manager.delete(holder.digest) == 1
                assert await asyncio.wait_for(taking, 5) is not None
                assert time.monotonic() - deleted < MAX_NAP / 2
                assert [h.job_id for h in await holder.holders()] == ["w"]

        run(main())


def test_a_release_skips_dead_queued_waiters(run: Run, redis_url: str, impl: str) -> None:
    """Queue heads whose life ran out (a killed waiter stops renewing it) are dropped by the
    release, which hands the lock to the first live waiter behind them."""
    with fastlock.Client(redis_url, max_connections=1) as probe:

        async def main() -> None:
            async with Client(redis_url, impl=impl) as client:
                holder = client.lock("dead-heads", ttl=30)
                assert await holder.acquire("holder") is not None
                wake = holder._main_scope.wake
                for n in range(3):  # entered long ago, alive until 1 ms after the epoch
                    probe.execute("ZADD", wake + "q", n, f"0:30000:1:dead{n}")
                    probe.execute("ZADD", wake + "a", 1, f"0:30000:1:dead{n}")
                taking = asyncio.create_task(client.lock("dead-heads", ttl=30, timeout=10).acquire("alive"))
                await _queued(probe, holder, 4)
                assert await holder.release("holder") is not None
                assert await asyncio.wait_for(taking, MAX_NAP / 2) is not None
                assert [h.job_id for h in await holder.holders()] == ["alive"]
                assert probe.execute("ZCARD", wake + "q") == 0

        run(main())
