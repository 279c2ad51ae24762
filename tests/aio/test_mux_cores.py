"""The asyncio connection and call of both cores against each other, on a real server: the
Cython ``MuxConnection`` / ``MuxCaller`` (``_coreparts/aio_*.pxi``) and their pure-Python twins
(``_coreparts/aio_py.py``) write the same bytes, give the same replies and raise the same
exceptions for the same steps; the Cython core's own future (``Reply``) behaves as
``asyncio.Future`` where a task or asyncio's helpers use it."""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import types
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from harness.cores import core_params, needs_cython

import fastlock
from fastlock.aio import Client
from fastlock.params import parse_url
from fastlock.protocol.commands import refuse_connection_state
from fastlock.scripts.calling import ScriptSettings, record_call, register
from fastlock.scripts.registry import ScriptRegistry

Run = Callable[[Coroutine[Any, Any, Any]], Any]

CORES = {"cython": "fastlock._core", "python": "fastlock._core_py"}
REFUSED = object()  # an argument of a type no core sends


class Tee(asyncio.Protocol):
    """Between the loop's transport and a core's connection: what the core writes is kept."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.inner.connection_made(self)

    def write(self, data: bytes) -> None:
        self.sent += data
        self.transport.write(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.transport.get_extra_info(name, default)

    def abort(self) -> None:
        self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> None:
        self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)


async def _session(core_name: str, url: str) -> tuple[bytes, list[Any]]:
    """One fixed sequence of steps on core ``core_name``: what it wrote and what came back
    (replies, exceptions as ``(type name, message)``, what it handed over)."""
    core: Any = importlib.import_module(CORES[core_name])
    loop = asyncio.get_running_loop()
    params = parse_url(url)
    conn = core.MuxConnection(loop, "test", 5.0)
    tee = Tee(conn)
    await loop.create_connection(lambda: tee, params.host, params.port)
    seen: list[Any] = []
    handed: list[Any] = []

    async def slow(*args: Any) -> Any:
        handed.append(("slow", args[0], tuple(args[1]), tuple(args[2])))
        return "slow"

    async def failed(outcome: Any, script: Any, keys: Any, args: Any, *rest: Any) -> Any:
        handed.append(("failed", type(outcome).__name__, str(outcome), script.name, tuple(keys), tuple(args)))
        if isinstance(outcome, asyncio.CancelledError):
            raise outcome  # as the client's: a cancelled caller stays cancelled
        return "recovered"

    async def again(args: tuple[Any, ...], timeout: Any, lost: bool) -> Any:
        handed.append(("again", args, lost))
        return "again"

    registry = ScriptRegistry()
    script = register(registry, "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}", name="echo")
    pool = types.SimpleNamespace(connections=[conn], max_in_flight=1024)
    caller = core.MuxCaller(
        pool, registry, ScriptSettings(), lambda s, a: list(a), slow, failed, record_call, 64, 5.0,
        refuse_connection_state, again,
    )  # fmt: skip
    seen.append(await conn.send(core.encode_command("SCRIPT", "LOAD", script.body)))
    seen.append(await caller.call("echo", ["k"], ["v", 41]))
    seen.append(await caller.call("echo", ("k",), (b"w", 1.5)))
    both = await asyncio.gather(caller.call("echo", ["a"], [1, 2]), caller.call("echo", ["b"], [True, 3]))
    seen.append(both)
    seen.append(await caller.execute("SET", "e", 1.5))
    seen.append(await caller.execute("GET", "e", timeout=1))
    for refused in (("HGET", "e", "f"), ("SELECT", 1), ("GET", REFUSED)):
        try:
            await caller.execute(*refused)
        except Exception as exc:  # noqa: BLE001 - compared between the cores
            seen.append(("raised", type(exc).__name__, str(exc)))
    three = core.encode_pipeline([("SET", "x", 1), ("INCR", "x"), ("HGET", "x", "f")])
    seen.append(await conn.send(three, 3))
    seen.append(await caller.call("echo", ["k"], [REFUSED]))  # refused, nothing written: handed over
    with pytest.raises(fastlock.ScriptNotFoundError) as unknown:
        await caller.call("nope", [], [])
    seen.append(("unknown", str(unknown.value)))
    pool.connections.clear()
    seen.append(await caller.call("echo", ["k"], ["v", 1]))  # no connection: handed over
    seen.append(await caller.execute("PING"))  # the same for a command
    pool.connections.append(conn)
    await conn.send(core.encode_command("SCRIPT", "FLUSH"))
    seen.append(await caller.call("echo", ["k"], ["v", 1]))  # NOSCRIPT: handed over
    task = asyncio.create_task(caller.call("echo", ["c"], ["never", 1]))  # a coroutine for a task
    await asyncio.sleep(0)
    task.cancel()  # queued, not flushed yet: never written
    with pytest.raises(asyncio.CancelledError):
        await task
    seen.append(("load", conn.load, conn.awaiting_replies))
    seen.append(await conn.send(core.encode_command("PING")))
    conn.close()
    seen.append(await caller.call("echo", ["k"], ["v", 1]))  # a closed connection: handed over unsent
    seen.append(await caller.execute("PING"))  # a command: once more (lost before it was written)
    seen.append(handed)
    return bytes(tee.sent), [_plain(x) for x in seen]


def _plain(value: Any) -> Any:
    """Error replies as (type name, message); containers through."""
    if isinstance(value, BaseException):
        return (type(value).__name__, str(value))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@needs_cython
def test_both_cores_write_the_same_bytes_and_read_the_same_replies(
    run: Run, loop: str, redis_url: str
) -> None:
    outcomes = {}
    for core_name in ("cython", "python"):
        outcomes[core_name] = run(_session(core_name, redis_url))
    (cython_bytes, cython_seen), (python_bytes, python_seen) = outcomes["cython"], outcomes["python"]
    assert cython_bytes == python_bytes
    assert cython_seen == python_seen
    assert b"never" not in cython_bytes  # the cancelled call was not written
    assert cython_seen[1] == [b"k", b"v", 42]
    handed = cython_seen[-1]
    assert [h[:2] for h in handed] == [
        ("failed", "ArgumentTypeError"),
        ("slow", "echo"),
        ("again", ("PING",)),
        ("failed", "NoScriptError"),
        ("failed", "CancelledError"),
        ("failed", "ConnectionError"),
        ("again", ("PING",)),
    ]
    assert [h[2] for h in handed if h[0] == "again"] == [False, True]
    raised = [x for x in cython_seen if isinstance(x, tuple) and x[0] == "raised"]
    assert [r[1] for r in raised] == ["WrongTypeError", "ArgumentError", "ArgumentTypeError"]


@pytest.mark.parametrize("impl", core_params("cython", "python"))
def test_a_call_is_a_coroutine_that_sends_nothing_until_awaited(run: Run, redis_url: str, impl: str) -> None:
    async def main() -> None:
        async with Client(redis_url, impl=impl) as client:
            client.register_script("return redis.call('INCR', KEYS[1])", name="incr")
            coroutine = client.call("incr", ["n"])
            assert asyncio.iscoroutine(coroutine)
            await asyncio.sleep(0.01)
            assert await client.execute("GET", "n") is None  # not sent yet
            assert await asyncio.ensure_future(coroutine) == 1
            assert await asyncio.wait_for(client.call("incr", ["n"]), 5) == 2
            unawaited = client.call("incr", ["n"])
            unawaited.close()  # never sent
            assert await client.call("incr", ["n"]) == 3

    run(main())


@needs_cython
def test_the_cython_reply_is_a_future_to_asyncio(run: Run, loop: str, redis_url: str) -> None:
    """What a task, ``asyncio.wait_for``, ``ensure_future`` and done callbacks do with the
    Cython core's ``Reply`` is what they do with an ``asyncio.Future``."""
    from fastlock import _core

    async def main() -> None:
        running = asyncio.get_running_loop()
        params = parse_url(redis_url)
        _, conn = await running.create_connection(
            lambda: _core.MuxConnection(running, "test"), params.host, params.port
        )
        reply = conn.send(_core.encode_command("PING"))
        assert asyncio.isfuture(reply) and asyncio.ensure_future(reply) is reply
        assert reply.get_loop() is running and not reply.done()
        var = contextvars.ContextVar("var", default="outside")
        seen: list[Any] = []
        var.set("given")
        context = contextvars.copy_context()
        var.set("current")
        reply.add_done_callback(lambda r: seen.append(("context", var.get())), context=context)
        reply.add_done_callback(lambda r: seen.append(("second", r.result())))
        removed = reply.add_done_callback(print) or reply.remove_done_callback(print)
        assert removed == 1
        assert await reply == b"PONG" and reply.result() == b"PONG" and reply.exception() is None
        await asyncio.sleep(0)
        assert seen == [("context", "given"), ("second", b"PONG")]
        assert not reply.cancel() and reply.done() and not reply.cancelled()
        late: list[Any] = []
        reply.add_done_callback(late.append)  # on a done future: scheduled at once
        await asyncio.sleep(0)
        assert late == [reply]
        waiting = conn.send(_core.encode_command("BLPOP", "nothing", 1))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiting, 0.05)
        assert waiting.cancelled()
        with pytest.raises(asyncio.CancelledError):
            waiting.result()
        with pytest.raises(asyncio.InvalidStateError):
            waiting.set_result(1)
        pending = conn.send(_core.encode_command("PING"))
        with pytest.raises(asyncio.InvalidStateError):
            pending.result()
        pending.cancel("because")
        with pytest.raises(asyncio.CancelledError, match="because"):
            await pending
        task = asyncio.ensure_future(_await(conn.send(_core.encode_command("BLPOP", "nothing", 1))))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await conn.send(_core.encode_command("ECHO", "in step")) == b"in step"  # dropped, in order
        conn.close()

    run(main())


async def _await(awaitable: Any) -> Any:
    return await awaitable
