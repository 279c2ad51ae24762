"""fastlock.aio.Client against real servers, both cores: commands, scripts, pipelines,
blocking commands, connection settings and the coalescing of concurrent calls."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import fastlock
from fastlock.aio import Client
from fastlock.operations import AsyncRunner, Blocking, Call, Command, Commands, Operation, Sleep
from fastlock.testing.servers import TempServer

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""

INCR = "return redis.call('INCR', KEYS[1])"


def test_commands_errors_and_refusals(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            assert await client.execute("SET", "k", 1.5) == b"OK"
            assert await client.execute("GET", "k") == b"1.5"
            assert await client.execute("GET", "missing") is None
            with pytest.raises(fastlock.WrongTypeError):
                await client.execute("LPUSH", "k", 1)
            replies = await client.execute_many([("INCR", "n"), ("LPUSH", "k", 1), ("GET", "k")])
            assert replies[0] == 1 and isinstance(replies[1], fastlock.WrongTypeError)
            assert replies[2] == b"1.5" and await client.execute_many([]) == []
            with pytest.raises(fastlock.ArgumentError, match="MULTI"):
                await client.execute("MULTI")
            with pytest.raises(fastlock.ArgumentError, match="SELECT"):
                await client.execute_many([("PING",), ("SELECT", 1)])
            with pytest.raises(fastlock.ArgumentTypeError, match="argument 3"):
                await client.execute("SET", "k", "v", object())
            assert await client.execute("ECHO", "in step") == b"in step"
            assert client.pool.opened == 1

    run(main())


def test_client_is_an_async_runner(run: Run, redis_url: str, impl: str) -> None:
    """The AsyncRunner methods (plus a keyword-only ``timeout``), and run() drives every step."""
    for name in ("call", "execute", "execute_blocking", "execute_many", "run"):
        ours = inspect.signature(getattr(Client, name)).parameters
        theirs = inspect.signature(getattr(AsyncRunner, name)).parameters
        extra = {key: value for key, value in ours.items() if key not in theirs}
        assert list(theirs.items()) == [item for item in ours.items() if item[0] not in extra]
        assert [(p.name, p.kind, p.default) for p in extra.values()] in (
            [],
            [("timeout", inspect.Parameter.KEYWORD_ONLY, None)],
        )

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            counter = client.register_script(INCR, name="incr_by_script")

            def operation() -> Operation[list[Any]]:
                got = [(yield Command(("SET", "k", "v")))]
                got.append((yield Commands([("GET", "k"), ("LPUSH", "k", 1)])))
                got.append((yield Call(counter.name, ["n"])))
                got.append((yield Sleep(0.001)))
                got.append((yield Blocking(("BLPOP", "empty", 0.01), timeout=0.01)))
                try:
                    yield Command(("INCR", "k"))
                except fastlock.ResponseError as exc:
                    got.append(type(exc))
                return got

            runner: AsyncRunner = client
            got = await runner.run(operation())
            assert got[:2] == [b"OK", [b"v", got[1][1]]] and isinstance(got[1][1], fastlock.WrongTypeError)
            assert got[2:] == [1, None, None, fastlock.ResponseError]

    run(main())


def test_scripts_noscript_and_stats(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            counter = client.register_script(INCR, name="counter")
            assert await counter(["n"]) == 1
            assert await client.call("counter", ["n"]) == 2
            await client.execute("SCRIPT", "FLUSH")
            assert await asyncio.gather(*(counter(["n"]) for _ in range(10))) == list(range(3, 13))
            stats = client.script_stats()["counter"]
            assert stats.calls == 12 and stats.errors == 0 and stats.reloads >= 2
            with pytest.raises(fastlock.ScriptNotFoundError):
                await client.call("no_such_script")
            failing = client.register_script("return redis.call('INCR', KEYS[1], 'x')", name="bad")
            with pytest.raises(fastlock.LuaError):
                await failing(["n"])
            assert client.script_stats()["bad"].errors == 1
            assert (await client.server_version())[0].isdigit()
            await client.execute("SCRIPT", "FLUSH")
            await client.warm_up()
            assert await client.execute("SCRIPT", "EXISTS", counter.sha) == [1]
            await client.execute("SCRIPT", "FLUSH")
        async with Client(redis_url, impl=impl, warm_up=True) as warm:  # each new connection loads all
            shas = [script.sha for script in warm.scripts.load_all()]
            assert shas and await warm.execute("SCRIPT", "EXISTS", *shas) == [1] * len(shas)

    run(main())


def test_busy_server_is_waited_for(run: Run, private_server: TempServer, impl: str) -> None:
    """BUSY replies are retried (the recovery operation, with awaited sleeps) until the script ends.

    The loop runs until the test kills it (at most 20 s), so no phase depends on the machine's load.
    """
    assert private_server.raw_command("CONFIG", "SET", "busy-reply-threshold", "20") == b"+OK\r\n"
    loop = "local t = redis.call('TIME') local s = t[1] * 1e6 + t[2] while true do t = redis.call('TIME') if t[1] * 1e6 + t[2] - s > 20000000 then break end end return 1"  # noqa: E501
    busy = threading.Thread(target=private_server.raw_command, args=("EVAL", loop, 0))

    async def main() -> None:
        async with Client(private_server.url, impl=impl) as client:
            counter = client.register_script(INCR, name="counter")
            assert await counter(["n"]) == 1
            busy.start()
            deadline = time.monotonic() + 5
            while not private_server.raw_command("PING").startswith(b"-BUSY"):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            with pytest.raises(fastlock.ScriptBusyError):
                await client.call("counter", ["n"], busy_timeout=0.05)
            waiting = asyncio.create_task(counter(["n"]))
            for _ in range(5):  # the event loop keeps running while the call waits
                await asyncio.sleep(0.01)
            assert not waiting.done()
            assert await asyncio.to_thread(private_server.raw_command, "SCRIPT", "KILL") == b"+OK\r\n"
            assert await waiting == 2  # retried until the loop ended

    run(main())
    busy.join()


def test_pipeline_and_bound_scripts(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            async with client.pipeline() as pipe:
                pipe.execute_command("SET", "a", 1).execute_command("INCR", "a")
                assert len(pipe) == 2
                assert await pipe.execute() == [b"OK", 2]
                pipe.execute_command("LPUSH", "a", 1).execute_command("GET", "a")
                with pytest.raises(fastlock.WrongTypeError):
                    await pipe.execute()
                pipe.execute_command("LPUSH", "a", 1)
                assert isinstance((await pipe.execute(raise_on_error=False))[0], fastlock.WrongTypeError)
                pipe.execute_command("PING")
            assert len(pipe) == 0
            with pytest.raises(fastlock.ArgumentError):
                pipe.execute_command("WATCH", "a")
            bound = client.register_script("return ARGV[1]")
            assert await client.script(bound.name)(args=["x"]) == b"x" and "BoundScript" in repr(bound)

    run(main())


def test_blocking_commands_use_dedicated_connections(run: Run, redis_url: str, impl: str) -> None:
    """A BLPOP waiting on the server holds up no other command; its connection is reused."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            assert await client.execute_blocking("BLPOP", "q", 0.05, timeout=0.05) is None
            waiting = asyncio.create_task(client.execute_blocking("BLPOP", "q", 5, timeout=5))
            await asyncio.sleep(0.05)
            started = time.monotonic()
            assert await client.execute("RPUSH", "q", "job") == 1  # not queued behind the BLPOP
            assert await waiting == [b"q", b"job"]
            assert time.monotonic() - started < 1
            assert client.pool.opened == 2  # one multiplexed, one dedicated (reused)
            with pytest.raises(fastlock.WrongTypeError):
                await client.execute("SET", "s", 1) and await client.execute_blocking(
                    "BLPOP", "s", 0.01, timeout=0.01
                )
            # cancelled while the server blocks: that connection is closed, not handed on
            cancelled = asyncio.create_task(client.execute_blocking("BLPOP", "q", 5, timeout=5))
            await asyncio.sleep(0.05)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            await client.execute("RPUSH", "q", "kept")
            assert await client.execute_blocking("BLPOP", "q", 1, timeout=1) == [b"q", b"kept"]

    run(main())


def test_connection_settings(run: Run, server_factory: Callable[..., TempServer], impl: str) -> None:
    srv = server_factory(password="s3cret", acl_users=[("alice", "wonder", "+@all ~*")])

    async def main() -> None:
        async with Client(f"{srv.url}/5?client_name=flt", impl=impl, password="s3cret") as client:
            info = await client.execute("CLIENT", "INFO")
            assert b" db=5 " in info and b" name=flt " in info
        async with Client(srv.unix_url, impl=impl, username="alice", password="wonder") as client:
            assert await client.execute("ACL", "WHOAMI") == b"alice"
        async with Client(srv.url, impl=impl, password="wrong") as client:
            with pytest.raises(fastlock.AuthenticationError):
                await client.execute("PING")
            assert client.pool.connections == []
        async with Client("redis://127.0.0.1:1", impl=impl) as client:
            with pytest.raises(fastlock.ConnectionError) as info:
                await client.execute("PING")
            assert info.value.sent is False

    run(main())


def test_tls(run: Run, tls_server: TempServer, impl: str) -> None:
    async def main() -> None:
        url = f"{tls_server.tls_url}?ssl_ca_certs={tls_server.ca_path}"
        async with Client(url, impl=impl) as client:
            assert await client.execute("SET", "tls", "yes") == b"OK"
            assert await client.register_script("return ARGV[1]")(args=["over tls"]) == b"over tls"
        async with Client(tls_server.tls_url, impl=impl) as client:
            with pytest.raises(fastlock.ConnectionError) as info:
                await client.execute("PING")
            assert info.value.sent is False

    run(main())


def test_from_redis_asyncio(run: Run, server: Any, impl: str) -> None:
    import redis.asyncio  # in the test extra: a missing package fails the test, never skips it

    async def main() -> None:
        r = redis.asyncio.Redis(host=server.host, port=server.port, db=4)
        async with Client.from_redis(r, impl=impl) as client:
            await client.execute("SET", "shared", "from fastlock")
            assert await r.get("shared") == b"from fastlock" and client.params.db == 4
        await r.aclose()

    run(main())


def test_concurrent_calls_are_coalesced(run: Run, loop: str, redis_url: str, impl: str) -> None:
    """200 tasks calling at once: a handful of writes on one connection, not 200."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            counter = client.register_script(INCR, name="counter")
            await counter(["warm"])
            writes = client.pool.writes
            replies = await asyncio.gather(*(counter(["n"]) for _ in range(200)))
            assert sorted(replies) == list(range(1, 201))
            assert client.pool.writes - writes <= 3 and client.pool.opened == 1

    run(main())


def test_replies_are_matched_under_1000_tasks(run: Run, loop: str, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl, max_in_flight=300) as client:
            echo = client.register_script("return ARGV[1]", name="echo")

            async def task(i: int) -> None:
                for j in range(20):
                    value = f"{i}:{j}"
                    reply = await (echo(args=[value]) if j % 2 else client.execute("ECHO", value))
                    assert reply == value.encode()

            await asyncio.gather(*(task(i) for i in range(1000)))
            assert 4 >= len(client.pool.connections) >= 2  # the in-flight bound opened more

    run(main())


def test_the_in_flight_bound_waits_at_max_connections(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl, max_connections=1, max_in_flight=2) as client:
            replies = await asyncio.gather(*(client.execute("INCR", "n") for _ in range(50)))
            assert sorted(replies) == list(range(1, 51)) and client.pool.opened == 1

    run(main())


COUNT = "redis.call('INCR', KEYS[1]) return {KEYS[1], ARGV[1]}"


def test_pipeline_calls_scripts_by_name_as_the_sync_one(run: Run, redis_url: str, impl: str) -> None:
    """``pipe.call(name, keys, args)`` on asyncio (issue 23, defect 6): the sync signature,
    queued in order with the commands in one write, meta values appended, an unknown name
    refused when queued, an error reply the call's LuaError report."""
    for method in ("call", "execute", "execute_command"):
        sync, aio = (
            inspect.signature(getattr(cls, method)) for cls in (fastlock.Pipeline, fastlock.aio.Pipeline)
        )
        assert aio.parameters == sync.parameters, method

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            count = client.register_script(COUNT).name
            meta = client.register_script("-- #meta script_name\nreturn {ARGV[1], META.script_name}").name
            fail = client.register_script("redis.call('INCR', KEYS[1]) error('no luck')").name
            assert await client.call(count, ["warm"], [0]) == [b"warm", b"0"]
            assert await client.call(meta, [], ["w"]) == [b"w", meta.encode()]  # loaded
            writes = client.pool.writes
            async with client.pipeline() as pipe:
                assert (
                    pipe.call(count, ["a"], ["x"]).execute_command("INCR", "a").call(count, ("a",), (2.5,))
                    is pipe
                )
                pipe.call(meta, [], ["m"])
                assert len(pipe) == 4
                assert await pipe.execute() == [[b"a", b"x"], 2, [b"a", b"2.5"], [b"m", meta.encode()]]
                assert len(pipe) == 0
            assert client.pool.writes == writes + 1  # one write (script_name needs no INFO)
            assert await client.execute("GET", "a") == b"3"
            with pytest.raises(fastlock.ScriptNotFoundError):
                client.pipeline().call("no_such_script", ["a"])
            error, counted = (
                await client.pipeline()
                .call(fail, ["f"])
                .call(count, ["a"], [1])
                .execute(raise_on_error=False)
            )
            assert (
                isinstance(error, fastlock.LuaRaisedError)
                and error.script == fail
                and "no luck" in str(error)
            )
            assert counted == [b"a", b"1"]
            with pytest.raises(fastlock.LuaRaisedError):
                await client.pipeline().call(fail, ["f"]).execute()
            assert await client.execute("GET", "f") == b"2"  # never sent again

    run(main())


def test_pipeline_keeps_its_order_when_a_script_is_not_loaded(run: Run, redis_url: str, impl: str) -> None:
    """Issue 23, defect 5 on asyncio: a script not seen loaded runs as ``EVAL`` in its place;
    one flushed meanwhile (``NOSCRIPT`` with later commands run) is a ScriptNotRunError, not
    run out of order, unless ``allow_reorder``."""

    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            incr = client.register_script("return redis.call('INCR', KEYS[1])").name
            await client.execute("SCRIPT", "FLUSH")
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n").call(incr, ["n"])
            assert await pipe.execute() == [1, b"1", 2]
            await client.execute("SCRIPT", "FLUSH")  # seen loaded: EVALSHA now, NOSCRIPT
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n").call(incr, ["n"])
            refused, got, last = await pipe.execute(raise_on_error=False)
            assert isinstance(refused, fastlock.ScriptNotRunError) and refused.index == 0
            assert (got, last) == (b"2", 3)  # the last call, nothing after it: sent again
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n")  # in place again
            assert await pipe.execute() == [4, b"4"]
            await client.execute("SCRIPT", "FLUSH")
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n")
            with pytest.raises(fastlock.ScriptNotRunError, match="out of order"):
                await pipe.execute()
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n")
            await client.execute("SCRIPT", "FLUSH")  # queued as EVAL: flushing cannot hurt
            assert await pipe.execute() == [5, b"5"]
            await client.execute("SCRIPT", "FLUSH")
            pipe = client.pipeline().call(incr, ["n"]).execute_command("GET", "n")
            assert await pipe.execute(allow_reorder=True) == [6, b"5"]  # GET ran first

    run(main())
