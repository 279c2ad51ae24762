"""SentinelClient and AsyncSentinelClient on a master, a replica and three sentinels (Redis
and Valkey): discovery, locks and queues, ``SENTINEL FAILOVER`` under load (the resume time
from the sentinels' announcement printed with ``-s``; bench/sentinel_failover.py measures
it), following ``+switch-master`` with polling disabled, after the subscription is lost, and
a SIGKILLed master (no write executed twice)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import fastlock
from fastlock.cluster.durability import ReplicationError
from fastlock.cluster.sentinel import SentinelClient, master_reply, sentinel_reply
from fastlock.cluster.sentinel_aio import AsyncSentinelClient
from fastlock.cluster.sentinel_follow import Resend, Watch, switch_message
from fastlock.testing.cluster import wait_until
from fastlock.testing.raw import raw_command
from fastlock.testing.sentinel import TempSentinels
from fastlock.testing.servers import TempServer

pytestmark = pytest.mark.slow  # slow tier: sentinel failovers

LOOSE = 60.0
"""Deadline (seconds) of every wait below: generous, for a loaded 2-core machine."""
HUGE = 3600.0
"""A ``poll_interval`` that never comes during a test: only ``+switch-master`` moves the client."""


def test_replies() -> None:
    assert sentinel_reply([b"127.0.0.1", b"6380"]) == ("127.0.0.1", 6380) and sentinel_reply(None) is None
    assert master_reply([b"master", 0, []]) and not master_reply([b"slave", b"h", 1, b"connected", 0])


def test_discovery_locks_and_queues(sentinels: TempSentinels, impl: str) -> None:
    with SentinelClient(sentinels.sentinels, sentinels.service, impl=impl) as client:
        assert client.master == ("127.0.0.1", sentinels.master_port())
        lock = client.lock("report", ttl=10)
        token = lock.acquire("a")
        assert token is not None and lock.release("a") == token
        queue = client.queue("sentinel-jobs")
        queue.enqueue("x")
        jobs = queue.claim()
        assert [job.payload for job in jobs] == [b"x"]
        queue.complete(jobs)
        assert client.execute_many([("SET", "k", 1), ("GET", "k")]) == [b"OK", b"1"]


def test_rwlock_waiters_block_on_the_master(sentinels: TempSentinels, impl: str) -> None:
    """A read-write lock on the master: a waiting reader (no listener: blocked on the wake
    stream) is woken by the writer's release."""
    with SentinelClient(sentinels.sentinels, sentinels.service, impl=impl) as client:
        rw = client.rwlock(f"report-{impl}", ttl=10, timeout=5)  # the deployment is the module's
        writer = rw.write.acquire("w")
        got: list[int | None] = []
        reader = threading.Thread(target=lambda: got.append(rw.read.acquire("r")))
        reader.start()
        time.sleep(0.2)
        released = time.monotonic()
        assert writer is not None and rw.write.release("w") == writer
        reader.join(LOOSE)
        assert got and got[0] is not None and got[0] > writer and time.monotonic() - released < 0.5
        assert rw.read.release("r") == got[0]


def test_unknown_service_is_a_connection_error(sentinels: TempSentinels) -> None:
    try:
        SentinelClient(sentinels.sentinels, "nope", poll_interval=None)
    except fastlock.ConnectionError as exc:
        assert "nope" in str(exc) and not exc.sent
    else:
        raise AssertionError("no error")


def test_sentinel_failover_is_followed(fresh_sentinels: TempSentinels) -> None:
    sentinels = fresh_sentinels
    with SentinelClient(sentinels.sentinels, sentinels.service) as client:
        stop = threading.Event()
        successes: list[tuple[float, tuple[str, int]]] = []
        errors: list[BaseException] = []
        overlaps = 0
        holding: set[str] = set()

        def work(me: str) -> None:
            nonlocal overlaps
            n = 0
            while not stop.is_set():
                name = f"job-{n % 4}"
                n += 1
                lock = client.lock(name, ttl=10)
                try:
                    if lock.acquire(me) is None:
                        continue
                    overlaps += name in holding
                    holding.add(name)
                    successes.append((time.monotonic(), client.master))
                    holding.discard(name)
                    lock.release(me)
                except fastlock.FastlockError as exc:
                    errors.append(exc)
                    time.sleep(0.01)

        threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
        for thread in threads:
            thread.start()
        try:
            time.sleep(0.3)
            new, writable, announced = sentinels.failover()
            new_address = ("127.0.0.1", new.port)
            wait_until(lambda: any(m == new_address for _, m in successes), LOOSE, "resumed")
        finally:
            stop.set()
            for thread in threads:
                thread.join(10)
        on_new = [t for t, master in successes if master == ("127.0.0.1", new.port)]
        assert on_new, "no success on the new master"
        resumed = min(on_new) - announced
        print(
            f"\n{sentinels.flavour} SENTINEL FAILOVER: writable after the command at +0, announced"
            f" {(announced - writable) * 1e3:.0f} ms after writable; first success on the new master"
            f" {resumed * 1e3:.0f} ms after the announcement; errors raised {len(errors)}"
        )
        assert overlaps == 0


async def _async_follow(sentinels: TempSentinels, impl: str | None) -> tuple[float, int]:
    client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, impl=impl)
    async with client:
        lock = client.lock("async-report", ttl=10)
        assert await lock.acquire("a") is not None
        await lock.release("a")
        loop = asyncio.get_running_loop()
        failover = loop.run_in_executor(None, sentinels.failover)
        old = client.master
        deadline = time.monotonic() + LOOSE
        while client.master == old and time.monotonic() < deadline:
            assert await lock.acquire("a") is not None
            await lock.release("a")
            await asyncio.sleep(0.005)
        switched = time.monotonic()
        _, _, announced = await failover
        assert await lock.acquire("a") is not None
        return switched - announced, client.switches


def test_async_sentinel_client_follows_a_failover(fresh_sentinels: TempSentinels) -> None:
    lag, switches = asyncio.run(_async_follow(fresh_sentinels, None))
    print(f"\n{fresh_sentinels.flavour} async: switched {lag * 1e3:.0f} ms after the announcement")
    assert switches == 2


def _listening(server: TempServer, channel: bytes) -> int:
    reply = raw_command(("127.0.0.1", server.port), "PUBSUB", "NUMSUB", channel)
    return int(reply.split(b"\r\n")[-2][1:])


def _queued(server: TempServer, channel: bytes) -> int:
    """How many waiters on ``channel`` are queued for a hand-over (the zset beside its wake list)."""
    return int(server.raw_command("ZCARD", channel.rsplit(b"@", 1)[0] + b"q")[1:-2])


def _channel(lock: Any) -> bytes:
    return f"{lock.manager.scope(lock.digest, '', lock.limit).wake}@0".encode()


def test_waiters_sleep_through_a_master_killed(fresh_sentinels: TempSentinels) -> None:
    """Threads wait on the listener of the master when it is killed: woken by the loss, they
    try again through the client (which follows the sentinels), enter again on the new
    master's listener, and each gets the lock in turn once its holder releases it."""
    sentinels = fresh_sentinels
    with SentinelClient(sentinels.sentinels, sentinels.service, failover_timeout=LOOSE) as client:
        holder = client.lock("sleepers", ttl=30)
        channel = _channel(holder)
        assert holder.acquire("holder") is not None
        sentinels.wait_synced()  # the holder's lock is on the replica too
        results: dict[int, Any] = {}
        locks = fastlock.LockManager(client, local_queue=False)

        def waiter(n: int) -> None:
            try:  # every waiter queues on the server (no local queue), all five through the failover
                lock = locks.lock("sleepers", ttl=30, timeout=LOOSE)
                results[n] = lock.acquire(f"w{n}")
                lock.release(f"w{n}")
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                results[n] = exc

        threads = [threading.Thread(target=waiter, args=(n,)) for n in range(5)]
        for thread in threads:
            thread.start()
        old = sentinels.current()[0]  # all five queued: each sleeps on the listener
        wait_until(lambda: _listening(old, channel) == 1 and _queued(old, channel) == 5, LOOSE, "queued")
        new = sentinels.kill_master()
        wait_until(lambda: _listening(new, channel) == 1, LOOSE, "listening on the new master")
        assert not results
        assert holder.release("holder") is not None
        for thread in threads:
            thread.join(LOOSE)
        assert not any(thread.is_alive() for thread in threads)
        assert all(type(results[n]) is int for n in range(5)), results


async def _async_waiters_through_failover(sentinels: TempSentinels) -> None:
    client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service)
    async with client:
        holder = client.lock("sleepers", ttl=30)
        channel = _channel(holder)
        assert await holder.acquire("holder") is not None

        async def waiter(n: int) -> int | None:
            lock = client.lock("sleepers", ttl=30, timeout=LOOSE)
            token = await lock.acquire(f"w{n}")
            if token is not None:
                assert await lock.release(f"w{n}") == token
            return token

        waiters = [asyncio.create_task(waiter(n)) for n in range(5)]
        old = sentinels.current()[0]
        await _until(lambda: _listening(old, channel) == 1, "listening")
        new, _, _ = await asyncio.to_thread(sentinels.failover)
        await _until(lambda: client.master == _address(new), "followed")
        await _until(lambda: _listening(new, channel) == 1, "listening on the new master")
        assert _listening(old, channel) == 0  # the demoted master's connection was dropped
        assert not any(task.done() for task in waiters)
        assert await holder.release("holder") is not None
        tokens = await asyncio.gather(*waiters)
        assert None not in tokens and len(set(tokens)) == 5


def test_async_waiters_sleep_through_a_failover(fresh_sentinels: TempSentinels) -> None:
    """``SENTINEL FAILOVER`` while tasks wait: the demoted master stays up, so the client drops
    its listener connection when it switches; the waiters enter again on the new master."""
    asyncio.run(_async_waiters_through_failover(fresh_sentinels))


def test_wait_after_acquire_on_the_master(sentinels: TempSentinels) -> None:
    with SentinelClient(sentinels.sentinels, sentinels.service, wait=(1, 1000)) as client:
        lock = client.lock("durable", ttl=10)
        token = lock.acquire("a")
        assert token is not None and lock.release("a") == token
    with (
        SentinelClient(sentinels.sentinels, sentinels.service, wait=(2, 20)) as client,
        pytest.raises(ReplicationError),
    ):
        client.lock("durable", ttl=10).acquire("a")

    async def on_asyncio() -> None:
        client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, wait=(1, 1000))
        try:
            lock = client.lock("durable-async", ttl=10)
            token = await lock.acquire("a")
            assert token is not None and await lock.release("a") == token
        finally:
            await client.close()
        client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, wait=(2, 20))
        try:
            with pytest.raises(ReplicationError) as info:
                await client.lock("durable-async", ttl=10).acquire("b")
            assert info.value.reply is not None  # the script ran: its reply is kept
        finally:
            await client.close()

    asyncio.run(on_asyncio())


def test_switch_message_and_watch() -> None:
    message = [b"message", b"+switch-master", b"fastlock 127.0.0.1 7000 127.0.0.1 7001"]
    assert switch_message(message, "fastlock") == ("127.0.0.1", 7001)
    assert switch_message(message, "other") is None
    assert switch_message([b"subscribe", b"+switch-master", 1], "fastlock") is None
    watch = Watch("fastlock", 3, poll_interval=5.0)
    assert [watch.lost() for _ in range(4)] == [0.0, 0.0, 0.05, 0.05] and watch.index == 1
    resend = Resend(fastlock.ConnectionError("lost", sent=True), 10.0, 0.0)
    with pytest.raises(fastlock.ConnectionError):
        resend.pause(0.0)  # it may have run: raised, never re-sent


def _address(server: TempServer) -> tuple[str, int]:
    return "127.0.0.1", server.port


def _lose(sentinels: TempSentinels, subscription: tuple[str, int] | None, loss: str) -> None:
    """Cut the client's subscription: CLIENT KILL it on its sentinel, or SIGKILL the sentinel."""
    assert subscription is not None
    if loss == "client-kill":
        reply = raw_command(subscription, "CLIENT", "KILL", "TYPE", "pubsub")
        assert reply.startswith(b":") and reply != b":0\r\n", reply
    else:
        sentinels.kill_sentinel(subscription[1])


LOSSES = pytest.mark.parametrize("loss", [None, "client-kill", "sentinel-kill"])


@LOSSES
def test_switch_master_is_followed(fresh_sentinels: TempSentinels, loss: str | None) -> None:
    """With polling disabled, only the ``+switch-master`` message can move the idle client
    (no call meets a READONLY); after a lost subscription, that of the next sentinel does."""
    sentinels = fresh_sentinels
    with SentinelClient(sentinels.sentinels, sentinels.service, poll_interval=HUGE) as client:
        wait_until(lambda: client.subscription is not None, LOOSE, "subscribed")
        first = client.subscription
        if loss is not None:
            _lose(sentinels, first, loss)
            wait_until(lambda: client.subscription not in (None, first), LOOSE, "subscribed again")
        new, _, _ = sentinels.failover()
        wait_until(lambda: client.master == _address(new), LOOSE, "followed")
        lock = client.lock("after", ttl=10)
        token = lock.acquire("a")
        assert token is not None and lock.release("a") == token
        assert client.switches == 2


async def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LOOSE
    while not check():
        assert time.monotonic() < deadline, f"not {what} after {LOOSE} s"
        await asyncio.sleep(0.01)


async def _async_switch(sentinels: TempSentinels, loss: str | None) -> None:
    client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, poll_interval=HUGE)
    async with client:
        await _until(lambda: client.subscription is not None, "subscribed")
        first = client.subscription
        if loss is not None:
            _lose(sentinels, first, loss)
            await _until(lambda: client.subscription not in (None, first), "subscribed again")
        new, _, _ = await asyncio.to_thread(sentinels.failover)
        await _until(lambda: client.master == _address(new), "followed")
        lock = client.lock("after", ttl=10)
        token = await lock.acquire("a")
        assert token is not None and await lock.release("a") == token
        assert client.switches == 2


@LOSSES
def test_async_switch_master_is_followed(fresh_sentinels: TempSentinels, loss: str | None) -> None:
    asyncio.run(_async_switch(fresh_sentinels, loss))


class _Writes:
    """``RPUSH writes i`` for i = 0, 1, ...: which were acknowledged, which may have run (an
    error after the write) and which surely did not (an error before it)."""

    def __init__(self) -> None:
        self.issued = 0
        self.acked: list[int] = []
        self.maybe: set[int] = set()
        self.unsent: set[int] = set()
        self.unexpected: list[BaseException] = []

    def outcome(self, i: int, error: BaseException | None) -> None:
        if error is None:
            self.acked.append(i)
        elif isinstance(error, fastlock.ConnectionError):
            (self.maybe if error.sent else self.unsent).add(i)
        else:
            self.unexpected.append(error)

    def check(self, final: list[bytes], first_on_new: int) -> None:
        """No write twice, none that surely did not run, every one acknowledged by the new master."""
        assert self.unexpected == []
        written = [int(x) for x in final]
        assert len(written) == len(set(written)), "a write executed twice"
        assert set(written) <= set(self.acked) | self.maybe, "a write reported as not sent ran"
        missing = {i for i in self.acked if i >= first_on_new} - set(written)
        assert not missing, f"acknowledged by the new master, then lost: {sorted(missing)}"
        assert any(i >= first_on_new for i in self.acked), "nothing written on the new master"


def test_master_killed(fresh_sentinels: TempSentinels) -> None:
    sentinels = fresh_sentinels
    with SentinelClient(sentinels.sentinels, sentinels.service, failover_timeout=LOOSE) as client:
        writes, stop = _Writes(), threading.Event()

        def work() -> None:
            while not stop.is_set():
                i = writes.issued
                writes.issued += 1
                try:
                    client.execute("RPUSH", "writes", i)
                except Exception as exc:  # noqa: BLE001 - every outcome is checked below
                    writes.outcome(i, exc)
                else:
                    writes.outcome(i, None)

        thread = threading.Thread(target=work)
        thread.start()
        try:
            wait_until(lambda: len(writes.acked) >= 20, LOOSE, "writing")
            new = sentinels.kill_master()
            wait_until(lambda: client.master == _address(new), LOOSE, "followed")
            first_on_new = writes.issued + 1  # issued after the switch: sent to the new master
            wait_until(lambda: writes.issued > first_on_new + 20, LOOSE, "writing on the new master")
        finally:
            stop.set()
            thread.join(LOOSE)
        writes.check(client.execute("LRANGE", "writes", 0, -1), first_on_new)
        lock = client.lock("after", ttl=10)
        token = lock.acquire("a")
        assert token is not None and lock.release("a") == token


async def _async_master_killed(sentinels: TempSentinels) -> None:
    client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, failover_timeout=LOOSE)
    async with client:
        writes, stop = _Writes(), asyncio.Event()

        async def work() -> None:
            while not stop.is_set():
                i = writes.issued
                writes.issued += 1
                try:
                    await client.execute("RPUSH", "writes", i)
                except Exception as exc:  # noqa: BLE001 - every outcome is checked below
                    writes.outcome(i, exc)
                else:
                    writes.outcome(i, None)

        task = asyncio.create_task(work())
        try:
            await _until(lambda: len(writes.acked) >= 20, "writing")
            new = await asyncio.to_thread(sentinels.kill_master)
            await _until(lambda: client.master == _address(new), "followed")
            first_on_new = writes.issued + 1
            await _until(
                lambda: writes.issued > first_on_new + 20 or task.done(), "writing on the new master"
            )
        finally:
            stop.set()
            await task
        writes.check(await client.execute("LRANGE", "writes", 0, -1), first_on_new)
        lock = client.lock("after", ttl=10)
        token = await lock.acquire("a")
        assert token is not None and await lock.release("a") == token


def test_async_master_killed(fresh_sentinels: TempSentinels) -> None:
    asyncio.run(_async_master_killed(fresh_sentinels))
