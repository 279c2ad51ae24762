"""SentinelClient on a master, a replica and three sentinels (Redis and Valkey): discovery,
locks and queues, and ``SENTINEL FAILOVER`` under load, with the resume time measured from
the sentinels' announcement (printed with ``-s``)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fastlock
from fastlock.cluster.durability import ReplicationError
from fastlock.cluster.sentinel import SentinelClient, master_reply, sentinel_reply
from fastlock.cluster.sentinel_aio import AsyncSentinelClient
from fastlock.testing.sentinel import TempSentinels


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
            time.sleep(0.8)
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
        assert resumed < 0.2


async def _async_follow(sentinels: TempSentinels, impl: str | None) -> tuple[float, int]:
    client = await AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service, impl=impl)
    async with client:
        lock = client.lock("async-report", ttl=10)
        assert await lock.acquire("a") is not None
        await lock.release("a")
        loop = asyncio.get_running_loop()
        failover = loop.run_in_executor(None, sentinels.failover)
        old = client.master
        deadline = time.monotonic() + 5
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
    assert lag < 0.2 and switches == 2


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
