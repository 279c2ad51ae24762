"""Cancellation, timeouts and lost connections of fastlock.aio (the redis.asyncio CVE history
of issue 12): a cancelled caller detaches from its reply, the connection stays in step and in
use, an unwritten command is never written, nothing is written twice."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.size import sized

import fastlock
import fastlock.aio.connection
from fastlock.aio import Client
from fastlock.testing.proxy import TcpProxy

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""

ONCE = "local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1) return {ARGV[1], n}"
"""Counts each call id's runs: a reply names its call, and a count above 1 is a double write."""


async def _until(predicate: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition never met"
        await asyncio.sleep(0.001)


def test_cancelled_before_the_write_is_never_written(run: Run, loop: str, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            await client.execute("PING")
            conn = client.pool.connections[0]
            writes = conn.writes
            task = asyncio.create_task(client.execute("INCR", "never"))
            await asyncio.sleep(0)  # the task queued its command; the flush comes after us
            assert conn.load == 1 and conn.awaiting_replies == 0
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await client.execute("GET", "never") is None
            assert conn.writes == writes + 1 and conn.load == 0  # only the GET went out

    run(main())


def test_cancelled_after_the_write_drops_the_reply_and_keeps_the_connection(
    run: Run, loop: str, proxy: TcpProxy, impl: str
) -> None:
    async def main() -> None:
        async with Client(proxy.url, impl=impl) as client:
            client_id = await client.execute("CLIENT", "ID")
            conn = client.pool.connections[0]
            proxy.hold_replies()
            task = asyncio.create_task(client.execute("INCR", "n"))
            await _until(lambda: conn.awaiting_replies == 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            later = asyncio.create_task(client.execute("ECHO", "mine"))
            await _until(lambda: conn.awaiting_replies == 2)
            proxy.release_replies()
            assert await later == b"mine"  # not the INCR's reply
            assert await client.execute("CLIENT", "ID") == client_id  # same connection, not reopened
            assert await client.execute("GET", "n") == b"1"  # ran once
            assert client.pool.opened == 1 and proxy.connections == 1

    run(main())


def test_timeout_after_the_write_says_sent(run: Run, loop: str, proxy: TcpProxy, impl: str) -> None:
    async def main() -> None:
        async with Client(proxy.url, impl=impl) as client:
            client_id = await client.execute("CLIENT", "ID")
            proxy.set_reply_delay(0.6)
            started = time.monotonic()
            with pytest.raises(fastlock.TimeoutError) as info:
                await client.execute("INCR", "n", timeout=0.05)
            assert info.value.sent is True and time.monotonic() - started < 0.5  # before the reply
            with pytest.raises(fastlock.TimeoutError):
                await client.execute("INCR", "n", timeout=0.05)
            proxy.set_reply_delay(0)
            assert await client.execute("CLIENT", "ID") == client_id
            assert await client.execute("GET", "n") == b"2"

    run(main())


def test_a_server_that_stops_answering_has_its_connection_closed(
    run: Run, proxy: TcpProxy, impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A written request still unanswered STALLED_AFTER past its deadline closes the
    connection: the others written on it fail as sent, the next call gets a fresh one."""
    monkeypatch.setattr(fastlock.aio.connection, "STALLED_AFTER", 0.2)

    async def main() -> None:
        async with Client(proxy.url, impl=impl, max_connections=1) as client:
            await client.execute("PING")
            stalled = client.pool.connections[0]
            proxy.hold_replies()
            with pytest.raises(fastlock.TimeoutError) as timed_out:
                await client.execute("INCR", "n", timeout=0.05)
            assert timed_out.value.sent is True and not stalled.closed
            behind = asyncio.create_task(client.execute("INCR", "n"))  # no deadline of its own
            with pytest.raises(fastlock.TimeoutError) as info:
                await asyncio.wait_for(behind, 5)
            assert info.value.sent is True and "stopped answering" in str(info.value)
            assert stalled.closed and stalled not in client.pool.connections
            proxy.release_replies()
            assert await client.execute("GET", "n") in (None, b"1", b"2")  # may have run
            assert client.pool.opened == 2

    run(main())


def test_the_clients_socket_timeout_applies_to_every_call(run: Run, proxy: TcpProxy, impl: str) -> None:
    async def main() -> None:
        async with Client(proxy.url, impl=impl, socket_timeout=0.05) as client:
            counter = client.register_script("return redis.call('INCR', KEYS[1])")
            proxy.set_reply_delay(0.2)
            # a call's own timeout holds for each of its round trips: the first call loads the
            # script (NOSCRIPT, then SCRIPT LOAD and the call again in one write)
            assert await client.call(counter.name, ["n"], timeout=5) == 1
            with pytest.raises(fastlock.TimeoutError) as info:
                await counter(["n"])
            assert info.value.sent is True
            assert client.script_stats()[counter.name].errors == 1
            proxy.set_reply_delay(0)
            # the timed-out call ran once, never sent again, and the client works on: read with
            # an idempotent GET, tried again on a timeout (a 0.05 s socket timeout can trip on a
            # loaded machine: an INCR here was once late, "no reply in time", in a CI rehearsal)
            assert await _get_n(client) == b"2"

    run(main())


async def _get_n(client: Client) -> Any:
    """``GET n``, tried again on a timeout (idempotent)."""
    for _ in range(4):
        try:
            return await client.execute("GET", "n")
        except fastlock.TimeoutError:
            continue
    return await client.execute("GET", "n")


def test_timeout_before_the_write_says_not_sent(run: Run, proxy: TcpProxy, impl: str) -> None:
    """The only connection is at its in-flight bound: the call times out waiting for room."""

    async def main() -> None:
        async with Client(proxy.url, impl=impl, max_connections=1, max_in_flight=1) as client:
            await client.execute("PING")
            proxy.hold_replies()
            first = asyncio.create_task(client.execute("INCR", "a"))
            await _until(lambda: client.pool.connections[0].awaiting_replies == 1)
            with pytest.raises(fastlock.TimeoutError) as info:
                await client.execute("INCR", "b", timeout=0.05)
            assert info.value.sent is False
            proxy.release_replies()
            assert await first == 1
            assert await client.execute_many([("GET", "a"), ("GET", "b")]) == [b"1", None]

    run(main())


def test_connection_killed_mid_flight(run: Run, loop: str, redis_url: str, impl: str, server: Any) -> None:
    """CLIENT KILL while commands wait on the server (paused): written ones fail with
    ``sent=True``; the next call opens a fresh connection."""
    if server.version < (6, 2):
        pytest.skip("CLIENT PAUSE WRITE needs Redis 6.2")

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client, Client(redis_url, impl=impl) as admin:
            client_id = await client.execute("CLIENT", "ID")
            await admin.execute("CLIENT", "PAUSE", 5000, "WRITE")
            try:
                calls = [asyncio.create_task(client.execute("INCR", "n")) for _ in range(10)]
                await _until(lambda: client.pool.connections[0].awaiting_replies == 10)
                assert await admin.execute("CLIENT", "KILL", "ID", client_id) == 1
                for call in calls:
                    with pytest.raises(fastlock.ConnectionError) as info:
                        await call
                    assert info.value.sent is True
            finally:
                await admin.execute("CLIENT", "UNPAUSE")
            assert await client.execute("INCR", "n") == 1  # the paused INCRs never ran
            assert await client.execute("CLIENT", "ID") != client_id and client.pool.opened == 2

    run(main())


def test_unwritten_commands_are_sent_again_on_a_fresh_connection(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            await client.execute("PING")
            conn = client.pool.connections[0]
            task = asyncio.create_task(client.execute("INCR", "n"))
            await asyncio.sleep(0)  # queued, not written
            conn.close()
            assert await task == 1  # retried once, on a new connection
            assert await client.execute("GET", "n") == b"1" and client.pool.opened == 2

    run(main())


def test_connection_cut_fails_written_commands_as_sent(
    run: Run, proxy: TcpProxy, server: Any, impl: str
) -> None:
    async def main() -> None:
        async with Client(proxy.url, impl=impl) as client:
            await client.execute("PING")
            proxy.hold_replies()
            task = asyncio.create_task(client.execute("INCR", "n"))
            await _until(lambda: client.pool.connections[0].awaiting_replies == 1)
            # the proxy has passed the INCR on once the server has run it; only the reply is cut
            await _until(lambda: server.raw_command("GET", "n") == b"$1\r\n1\r\n")
            proxy.cut()
            with pytest.raises(fastlock.ConnectionError) as info:
                await task
            assert info.value.sent is True
            proxy.release_replies()
            assert await client.execute("GET", "n") == b"1"

    run(main())


FUZZ_CALLS = sized(20000, 5000, "FASTLOCK_AIO_FUZZ_CALLS")
"""Calls of the cancellation fuzz (issue 12's target run: 1000000)."""


@pytest.mark.slow  # slow tier: 20,000 calls
def test_cancellation_fuzz(run: Run, loop: str, proxy: TcpProxy, impl: str) -> None:
    """Calls through a proxy whose reply delay keeps changing, some cancelled at random moments,
    some with tiny timeouts: every reply reaches its own caller, no call runs twice, a call
    that timed out unsent never runs, and connections are reused, not reopened per cancel."""
    rng = random.Random(int(os.environ.get("FASTLOCK_AIO_FUZZ_SEED", "12")))
    outcomes: collections.Counter[str] = collections.Counter()
    delivered: list[int] = []
    unsent: list[int] = []

    async def main() -> int:
        async with Client(proxy.url, impl=impl, max_in_flight=256, max_connections=4) as client:
            once = client.register_script(ONCE, name="once")
            await once(["fuzz"], ["warm"])
            ids = iter(range(FUZZ_CALLS))

            async def call(i: int, timeout: float | None) -> None:
                reply = await client.call("once", ["fuzz"], [i], timeout=timeout)
                if reply == [str(i).encode(), 1]:
                    delivered.append(i)
                else:
                    outcomes["misdelivered"] += 1

            async def worker() -> None:
                for i in ids:
                    roll = rng.random()
                    try:
                        if roll < 0.15:
                            task = asyncio.create_task(call(i, None))
                            if rng.random() < 0.3:
                                await asyncio.sleep(0)
                            else:
                                await asyncio.sleep(rng.uniform(0, 0.002))
                            task.cancel()
                            await task
                        else:
                            await call(i, rng.uniform(0.0005, 0.004) if roll < 0.3 else None)
                        outcomes["replied"] += 1
                    except asyncio.CancelledError:
                        outcomes["cancelled"] += 1
                    except fastlock.TimeoutError as exc:
                        outcomes["timeout sent" if exc.sent else "timeout unsent"] += 1
                        if not exc.sent:
                            unsent.append(i)

            async def vary_delay() -> None:
                while True:
                    proxy.set_reply_delay(rng.choice([0.0, 0.0, 0.0005, 0.002, 0.005]))
                    await asyncio.sleep(0.01)

            varying = asyncio.create_task(vary_delay())
            started = time.monotonic()
            await asyncio.gather(*(worker() for _ in range(200)))
            elapsed = time.monotonic() - started
            varying.cancel()
            proxy.set_reply_delay(0)
            await asyncio.sleep(0.05)  # the last dropped replies come in
            counts = {
                int(k): int(v) for k, v in _pairs(await client.execute("HGETALL", "fuzz")) if k != b"warm"
            }
            outcomes["double writes"] = sum(n > 1 for n in counts.values())
            outcomes["delivered but not run once"] = sum(counts.get(i) != 1 for i in delivered)
            outcomes["unsent but run"] = sum(i in counts for i in unsent)
            outcomes["connections opened"] = client.pool.opened
            print(
                f"\ncancellation fuzz ({loop}, {impl}): {FUZZ_CALLS} calls, {elapsed:.1f} s: {dict(outcomes)}"
            )
            return len(counts)

    ran = run(main())
    assert outcomes["misdelivered"] == 0 and outcomes["double writes"] == 0
    assert outcomes["delivered but not run once"] == 0 and outcomes["unsent but run"] == 0
    assert outcomes["replied"] == len(delivered) and ran >= len(delivered)
    assert sum(outcomes[k] for k in ("replied", "cancelled", "timeout sent", "timeout unsent")) == FUZZ_CALLS
    assert outcomes["cancelled"] > 0 and outcomes["timeout sent"] > 0
    assert outcomes["connections opened"] <= 4  # reused, not reopened per cancellation


def _pairs(flat: list[bytes]) -> list[tuple[bytes, bytes]]:
    return list(zip(flat[::2], flat[1::2], strict=True))


def test_unsolicited_bytes_replace_the_connection(run: Run, proxy: TcpProxy, impl: str) -> None:
    """A reply no command asked for puts the stream out of step: that connection is closed
    and the next call opens another."""

    async def main() -> None:
        async with Client(proxy.url, impl=impl) as client:
            await client.execute("PING")
            proxy.send_to_clients(b":42\r\n")
            await _until(lambda: not client.pool.connections)
            assert await client.execute("INCR", "n") == 1 and client.pool.opened == 2

    run(main())


def test_close_ends_blocking_calls_in_flight(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        client = Client(redis_url, impl=impl)
        waiting = asyncio.create_task(client.execute_blocking("BLPOP", "q", 30, timeout=30))
        await asyncio.sleep(0.05)
        await client.close()
        with pytest.raises(fastlock.ConnectionError) as info:
            await waiting
        assert info.value.sent is True
        with pytest.raises(fastlock.ConnectionError):
            await client.execute("PING")

    run(main())
