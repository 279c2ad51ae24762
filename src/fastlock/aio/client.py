"""``fastlock.aio.Client``: the asyncio client, an :class:`~fastlock.operations.AsyncRunner`.

Commands of every task share a few multiplexed connections (:mod:`fastlock.aio.pool`), each
coalescing the commands issued in one loop iteration into one write
(:mod:`fastlock.aio.connection`); blocking commands borrow a dedicated connection.

Delivery (as in the sync client, docs/delivery.md): a command is sent again, once, on
another connection only when it provably never left the client (``ConnectionError.sent`` is
false); a timeout or a connection lost after the write is raised. Cancelling a caller never
closes a multiplexed connection: an unwritten command is dropped, a written one's reply is
read and dropped. ``timeout`` (per call, default the client's ``socket_timeout``) raises
:class:`~fastlock.TimeoutError` whose ``sent`` says whether the command was written.

Scripts run by ``EVALSHA`` sent directly; an error reply goes to the recovery operation of
:mod:`fastlock.scripts.calling`, driven by :meth:`Client.run` (:mod:`fastlock.aio.drive`).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from time import monotonic
from typing import TYPE_CHECKING, Any, Unpack

from .. import metrics
from ..exceptions import ConnectionError, FastlockError, ResponseError, TimeoutError
from ..operations import AsyncRunner, Command, Commands, Operation, Step, T, run_plan_async
from ..params import DEFAULT_URL, blocking_wait
from ..protocol.commands import refuse_connection_state, refuse_each
from ..scripts import calling
from ..scripts.calling import call_recorder, meta_values, read_server_version, recover
from ..scripts.clients import ClientOptions, ClientShell
from ..scripts.registry import Script, ScriptStats
from .access import AsyncLockQueueAccess
from .connection import Connection, open_connection
from .drive import drive, perform
from .notify import Listener
from .pipeline import BoundScript, Pipeline
from .pool import Pool

__all__ = ["AsyncClientOptions", "AsyncLockQueueAccess", "Client"]

Seconds = float | None

_RECORD = (calling.record_call, ScriptStats.FOLD_AT)
"""How a call that succeeded is recorded (in the core, as the sync client's)."""


class AsyncClientOptions(ClientOptions, total=False):
    """The options of :class:`Client`: the shared ones, and its pool's ``max_connections``
    (default 4) and ``max_in_flight`` (default 1024)."""

    max_in_flight: int


class Client(ClientShell[BoundScript, Pool], AsyncLockQueueAccess, AbstractAsyncContextManager["Client"]):
    """An asyncio Redis/Valkey client with automatic pipelining.

    ``url`` and the keyword ``options`` (:class:`AsyncClientOptions`: ``impl``,
    ``pool_timeout``, the script settings and connection parameters are those of
    :class:`fastlock.Client`) configure it; :attr:`script_settings` holds the script-call
    policy. ``max_connections`` (default 4) bounds the multiplexed connections (and, apart,
    the dedicated ones lent to blocking commands); ``max_in_flight`` (default 1024) the
    commands awaiting replies on one multiplexed connection before another is opened or
    callers wait (at most ``pool_timeout`` seconds). Connections open on first use, on the
    running loop; use the client from that loop only. Close it with ``await client.close()``
    or ``async with``.
    """

    kind = "fastlock.aio.Client"
    bound = BoundScript
    pool_options = (("max_connections", "max_connections"), ("max_in_flight", "max_in_flight"))

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[AsyncClientOptions]) -> None:
        self.scripts, self.script_settings, sizes = self._configure(url, options)
        self._loaded = self.scripts.loaded
        self._encode_command = self._core.encode_command
        self._encode_evalsha = self._core.encode_evalsha
        self._timeout = self.params.socket_timeout
        self._record_call = call_recorder(metrics.observer)  # a tracer installed before: every call
        self._listener: Listener | None = None
        self._pool = Pool(self._open, **sizes)
        handlers = (
            self._meta_args,
            self._call_slow,
            self._call_failed,
            *_RECORD,
            self._timeout,
            *self._commands(),
        )
        mux = self._core.MuxCaller(self._pool, self.scripts, self.script_settings, *handlers)
        self._caller = self._observed(mux)
        if type(self).call is Client.call:  # no Python frame of its own: the core's call itself
            vars(self)["call"] = self._caller.call
        if type(self).execute is Client.execute:
            vars(self)["execute"] = self._caller.execute

    def _commands(self) -> tuple[Any, ...]:
        """What the core's ``MuxCaller.execute`` is given: the refusal of commands changing a
        shared connection's state, and its rest in Python (:meth:`_execute_again`)."""
        return refuse_connection_state, self._execute_again

    def _meta_args(self, script: Script, args: Sequence[Any]) -> list[Any]:
        """``args`` and the values of ``script``'s ``#meta`` fields (the server version known)."""
        return [*args, *meta_values(script, self.script_settings)]

    async def _open(self) -> Connection:
        return await open_connection(self.params, self._core, self._first_load())

    @property
    def listener(self) -> Listener:
        """The wake-up listener of this client's blocked lock acquirers (one connection,
        opened on the first wait; :mod:`fastlock.aio.notify`)."""
        listener = self._listener
        if listener is None:
            listener = self._listener = Listener(self.params, self._core, self)
        return listener

    async def _request(self, payload: bytes, count: int, timeout: float | None) -> Any:
        """Send ``payload`` on a multiplexed connection; again on another one, once, if the
        connection was lost before it was written."""
        if timeout is None:
            timeout = self._timeout
        conn = self._pool.pick()
        if conn is None:
            conn = await self._acquire(timeout)
        try:
            return await conn.send(payload, count, timeout)
        except ConnectionError as exc:
            if exc.sent or isinstance(exc, TimeoutError):
                raise
        conn = await self._acquire(timeout)
        return await conn.send(payload, count, timeout)

    async def _acquire(self, timeout: float | None) -> Connection:
        """A connection with room, within the call's ``timeout``: else an unsent TimeoutError."""
        try:
            async with asyncio.timeout(timeout):
                return await self._pool.acquire()
        except builtins.TimeoutError as exc:
            if isinstance(exc, FastlockError):  # the pool's own wait, or connecting, timed out
                raise
            raise TimeoutError(
                f"no connection to {self.params.address} had room in time (before it was sent)", sent=False
            ) from None

    def execute(self, *args: Any, timeout: float | None = None) -> Coroutine[Any, Any, Any]:
        """Run one command, e.g. ``await client.execute("SET", "k", 1)``; error replies raise.

        ``timeout`` (seconds) overrides the client's ``socket_timeout`` for this call.
        Commands that would change a shared connection's state (``MULTI``, ``SUBSCRIBE``,
        ``SELECT``, ...) raise :class:`~fastlock.ArgumentError`, unsent. (Bound to the core's
        ``MuxCaller.execute`` itself, unless a subclass overrides it.)
        """
        return self._caller.execute(*args, timeout=timeout)

    async def _execute_again(self, args: tuple[Any, ...], within: Seconds, lost: bool) -> Any:
        """The rest of :meth:`execute` in Python, from the core's ``MuxCaller``: no connection
        had room (``lost`` false: sent as any request, on another connection once more if lost
        unwritten), or the command was lost before it was written (``lost``: once more, on
        another connection)."""
        payload = self._encode_command(*args)
        if not lost:
            reply = await self._request(payload, 0, within)
        else:
            within = self._timeout if within is None else within
            conn = await self._acquire(within)
            reply = await conn.send(payload, 0, within)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def execute_many(
        self, commands: Sequence[tuple[Any, ...]], *, timeout: float | None = None
    ) -> list[Any]:
        """:meth:`fastlock.Client.execute_many`, awaited (``timeout`` as in :meth:`execute`)."""
        refuse_each(commands)
        if not commands:
            return []
        replies: list[Any] = await self._request(self._core.encode_pipeline(commands), len(commands), timeout)
        return replies

    async def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command (``BLPOP``, ``BZPOPMIN``, ...) that may wait up to
        ``timeout`` seconds on the server, on a dedicated connection. Pass the same wait in
        the command's own arguments. Its reply is awaited ``timeout`` plus the client's
        ``socket_timeout`` (and at least ``BLOCKING_MARGIN`` more). Cancelled once sent, the
        command's connection is closed (the server stops waiting for it)."""
        refuse_connection_state(args)
        reply = await self._blocking(self._encode_command(*args), 0, timeout)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def _execute_blocking_many(self, commands: list[tuple[Any, ...]], timeout: float) -> list[Any]:
        """The awaited :meth:`fastlock.Client._execute_blocking_many` (``ASKING`` and a
        blocking command, on one dedicated connection)."""
        payload = self._core.encode_pipeline(commands)
        replies: list[Any] = await self._blocking(payload, len(commands), timeout)
        return replies

    async def _blocking(self, payload: bytes, count: int, timeout: float) -> Any:
        """Send ``payload`` (``count`` commands, 0: one) on a dedicated connection, its reply
        awaited ``timeout`` and the blocking margin; sent again once, on a fresh connection,
        only if it was never written."""
        wait = blocking_wait(timeout, self._timeout)
        pool = self._pool
        for attempt in range(2):
            conn = await pool.borrow()
            try:
                return await conn.send(payload, count, wait)
            except ConnectionError as exc:
                if attempt or exc.sent or isinstance(exc, TimeoutError):
                    raise
            finally:
                pool.give_back(conn)
        raise AssertionError("unreachable")  # pragma: no cover

    async def evalsha(self, sha: str | bytes, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """:meth:`fastlock.Client.evalsha`, awaited."""
        reply = await self._request(self._encode_evalsha(sha, keys, args), 0, None)
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def pipeline(self) -> Pipeline:
        """Collect commands and send them in one write: ``await pipe.execute()``."""
        return Pipeline(self)

    async def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` with awaited calls."""
        return await drive(self, operation)

    def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
        timeout: float | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """Run script ``name`` with ``keys`` and ``args`` and return its reply (a coroutine:
        nothing is sent before it is awaited).

        ``busy_timeout`` overrides the client's for this call, ``timeout`` its
        ``socket_timeout``. Raises a :class:`~fastlock.LuaError` when the script fails,
        :class:`~fastlock.ScriptBusyError` when the server stays busy,
        :class:`~fastlock.ScriptNotFoundError` for an unknown name. (Bound to the core's
        ``MuxCaller.call`` itself, unless a subclass overrides it.)
        """
        return self._caller.call(name, keys, args, busy_timeout=busy_timeout, timeout=timeout)

    async def _call_slow(self, name: str, keys: Any, args: Any, busy: Seconds, within: Seconds) -> Any:
        """The whole call in Python, for what the core's ``MuxCaller`` hands over before sending:
        the server version to read first (a script's ``#meta``), no connection with room."""
        try:
            script = self._loaded[name]
        except KeyError:
            script = self.scripts.get(name)
        if script.meta:
            if self.script_settings.server_version is None and "server_version" in script.meta:
                await self._run_within(read_server_version(self.script_settings), within)
            args = [*args, *meta_values(script, self.script_settings)]
        start = monotonic()
        try:
            reply = await self._request(self._encode_evalsha(script.sha, keys, args), 0, within)
        except BaseException as exc:
            calling.record_failure(script, self.script_settings, monotonic() - start, exc)
            raise
        return await self._call_failed(reply, script, keys, args, start, busy, within)

    async def _call_failed(
        self, outcome: Any, script: Script, keys: Any, args: Any, start: float, busy: Seconds, within: Seconds
    ) -> Any:
        """The rest of a call whose EVALSHA (``args`` with the meta values) got ``outcome``:
        a reply (an error reply goes to the recovery operation), or an exception (a request
        lost before it was written is sent once more, on another connection; any other is
        raised). The call's duration or failure is recorded here."""
        policy = self.script_settings
        try:
            if isinstance(outcome, BaseException) and not isinstance(outcome, ResponseError):
                if (
                    not isinstance(outcome, ConnectionError)
                    or outcome.sent
                    or isinstance(outcome, TimeoutError)
                ):
                    raise outcome
                outcome = await self._request(self._encode_evalsha(script.sha, keys, args), 0, within)
            if isinstance(outcome, ResponseError):
                recovery = recover(script, keys, args, outcome, start, policy, busy)
                outcome = await self._run_within(recovery, within)
        except BaseException as exc:
            calling.record_failure(script, policy, monotonic() - start, exc)
            raise
        self._record_call(script, policy, monotonic() - start)
        return outcome

    def _run_within(self, operation: Operation[T], within: Seconds) -> Coroutine[Any, Any, T]:
        """Run ``operation``, a part of one call, its commands under that call's ``timeout``."""
        return run_plan_async(operation, functools.partial(self._step_within, within))

    async def _step_within(self, within: Seconds, step: Step) -> object:
        if type(step) is Command:
            return await self.execute(*step.args, timeout=within)
        if type(step) is Commands:
            return await self.execute_many(step.commands, timeout=within)
        return await perform(self, step)

    async def server_version(self) -> str:
        """:attr:`fastlock.Client.server_version`, awaited."""
        return await self.run(read_server_version(self.script_settings))

    async def warm_up(self) -> None:
        """Load every script on a connection now (one write), so first calls find them."""
        commands, check = self._warm_up_load()
        check(await self.execute_many(commands))

    async def close(self) -> None:
        """Close every connection; commands still waiting fail with ``ConnectionError``."""
        if self._listener is not None:
            self._listener.close()
        await self._pool.close()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


if TYPE_CHECKING:
    _RUNNER: type[AsyncRunner] = Client  # mypy checks that a Client is an AsyncRunner
