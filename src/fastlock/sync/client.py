"""``Client``: a pool of core connections, commands, pipelines and named Lua scripts.

Retry policy (the whole contract: docs/delivery.md): a command is resent on a fresh
connection only when the failed attempt provably never left the client
(``ConnectionError.sent`` is false). After a timeout or a connection lost once the
command was written, the error is raised: the server may have run it, and only the
caller can know whether running it twice is safe.

Scripts (:meth:`Client.call`) run by ``EVALSHA``. A ``NOSCRIPT`` reply (restart,
failover, ``SCRIPT FLUSH``) means the script did not run (a script cannot return that
reply: :func:`fastlock.scripts.registry.guard` raises it instead): fastlock sends ``SCRIPT LOAD``
and ``EVALSHA`` again in one pipelined write (the whole call: 2 round trips, 3 commands),
at most :data:`MAX_RELOADS` times per call. A ``BUSY`` reply (another script runs past
``busy-reply-threshold``) is retried with jittered exponential backoff until the call's
``busy_timeout``, then :class:`~fastlock.ScriptBusyError`; ``SCRIPT KILL`` is sent only if
``kill_busy_after`` asks for it. Other script errors become :class:`~fastlock.LuaError`
reports (see :mod:`fastlock.scripts.errors`). Call metadata and includes: :mod:`fastlock.scripts.templates`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Sequence
from time import monotonic
from typing import Any, TypeVar

from .._impl import load_core
from ..exceptions import (
    ArgumentError,
    ArgumentTypeError,
    BusyError,
    ConnectionError,
    NoScriptError,
    NotBusyError,
    ResponseError,
    ScriptBusyError,
    UnkillableError,
)
from ..locks.lock import Lock
from ..locks.manager import LockManager
from ..operations import Operation
from ..queues.queue import Queue
from ..scripts.errors import lua_error
from ..scripts.registry import Script, ScriptCounters, ScriptRegistry, ScriptStats
from .connect import DEFAULT_URL, ConnectionParams, open_connection, parse_url, set_io_timeout
from .drive import drive
from .pool import ConnectionPool

__all__ = ["BLOCKING_MARGIN", "MAX_RELOADS", "BoundScript", "Client", "Pipeline"]

T = TypeVar("T")
_KEEP_CONNECTION = (ResponseError, ArgumentError, ArgumentTypeError)

BLOCKING_MARGIN = 1.0
"""Least time a blocking command's socket read waits beyond the command's own timeout."""

_SCRIPT_INSTEAD = "for atomic work use a Lua script (Client.register_script)"
_PUBSUB_INSTEAD = "use redis-py's PubSub, on its own connection"
_OWN_CONNECTION = "use a dedicated redis-py connection"
_REFUSED: dict[str, str] = {
    **dict.fromkeys(("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"), _SCRIPT_INSTEAD),
    **dict.fromkeys(
        ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"),
        _PUBSUB_INSTEAD,
    ),
    **dict.fromkeys(
        (
            "MONITOR",
            "SYNC",
            "PSYNC",
            "READONLY",
            "READWRITE",
            "CLIENT REPLY",
            "CLIENT TRACKING",
            "CLIENT CACHING",
        ),
        _OWN_CONNECTION,
    ),
    "SELECT": "pass db= to Client (or /<db> in the URL)",
    "AUTH": "pass username= and password= to Client (or put them in the URL)",
    "CLIENT SETNAME": "pass client_name= to Client",
    "HELLO": "fastlock speaks RESP2 only",
    "RESET": "build a new Client",
    "QUIT": "call Client.close()",
}
"""Commands that change the state of the connection they run on (its transaction,
protocol, database, user, reply mode or subscriptions), refused by :meth:`Client.execute`
and pipelines; the value says what to use instead."""

MAX_RELOADS = 3
"""Most ``SCRIPT LOAD`` + ``EVALSHA`` retries one call makes after ``NOSCRIPT``."""
_BUSY_FIRST_DELAY = 0.002
_BUSY_MAX_DELAY = 0.1
_log = logging.getLogger("fastlock.scripts")
_META_VALUES: dict[str, Callable[[Client, Script], Any]] = {
    "now": lambda client, script: time.time(),
    "debug": lambda client, script: client.debug,
    "max_history": lambda client, script: client.max_history,
    "script_name": lambda client, script: script.name,
    "server_version": lambda client, script: client.server_version,
}


class Client:
    """A Redis/Valkey client for hot loops.

    ``url`` is ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` for TLS or
    ``unix:///path.sock?db=N``; keyword arguments override what the URL says (see
    :class:`~fastlock.sync.connect.ConnectionParams`). ``impl`` picks the core
    (``"cython"`` or ``"python"``; default ``FASTLOCK_IMPL`` or the best available).

    Scripts: ``script_paths`` are folders searched before the built-in one; ``debug``
    makes scripts write their debug lines to the server log and logs every call's name
    and duration on the ``fastlock.scripts.registry`` logger at DEBUG; ``max_history`` is passed
    to scripts that declare it; ``busy_timeout`` (seconds) bounds the wait while the
    server is busy with another script; ``kill_busy_after`` (seconds, default never)
    sends ``SCRIPT KILL`` once a call has waited that long; ``warm_up`` loads every
    script on each new connection (one pipelined round trip).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        impl: str | None = None,
        max_connections: int = 50,
        pool_timeout: float | None = 5.0,
        health_check_interval: float | None = 1.0,
        script_paths: Iterable[str | os.PathLike[str]] = (),
        debug: bool = False,
        max_history: int = 1000,
        busy_timeout: float = 5.0,
        kill_busy_after: float | None = None,
        warm_up: bool = False,
        **params: Any,
    ) -> None:
        self.impl, self._core = load_core(impl)
        self.params: ConnectionParams = parse_url(url, **params)
        self.scripts = ScriptRegistry(script_paths)
        self._loaded = self.scripts.loaded
        self._evalsha = self._core.Connection.evalsha
        self.debug: bool = debug
        self.max_history: int = max_history
        self.busy_timeout: float = busy_timeout
        self.kill_busy_after: float | None = kill_busy_after
        self._server_version: str | None = None
        self._pool = ConnectionPool(
            self._open_and_load_scripts if warm_up else self._open,
            max_size=max_connections,
            timeout=pool_timeout,
            health_check_interval=health_check_interval,
        )

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> Client:
        """Build a client for the same server, database, credentials, timeouts and TLS
        settings as a redis-py (or valkey-py) client. ``kwargs`` go to :class:`Client`.
        redis-py's default ``socket_timeout=None`` is kept: ordinary commands wait for
        ever, blocking waits still end by their own timeout (:meth:`execute_blocking`)."""
        from ..interop.redis_py import params_from_redis

        params = params_from_redis(redis_client)
        return cls(**{**params, **kwargs})

    def _open(self) -> Any:
        return open_connection(self.params, self._core)

    def _open_and_load_scripts(self) -> Any:
        conn = self._open()
        scripts = self.scripts.load_all()
        try:
            replies = self._core.Connection.pipeline(conn, [("SCRIPT", "LOAD", s.body) for s in scripts])
            for script, reply in zip(scripts, replies, strict=True):
                if isinstance(reply, ResponseError):
                    raise lua_error(reply, script)
        except BaseException:
            conn.close()
            raise
        return conn

    @property
    def pool(self) -> ConnectionPool:
        """The connection pool (sizes and settings)."""
        return self._pool

    def _run(self, op: Callable[..., Any], *args: Any) -> Any:
        """Run ``op(connection, *args)`` on a pooled connection with the retry policy."""
        pool = self._pool
        conn = pool.get()
        try:
            result = op(conn, *args)
        except BaseException as exc:  # noqa: BLE001 - sorted out (and re-raised) below
            return self._after_failure(conn, exc, op, args)
        pool.put(conn)
        return result

    def _after_failure(
        self, conn: Any, exc: BaseException, op: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """Hand the connection back after ``exc``; retry once on a fresh connection only if
        nothing was sent."""
        self._release_after(conn, exc)
        if isinstance(exc, ConnectionError) and not exc.sent:
            return self._run_once_more(op, args)
        raise exc

    def _release_after(self, conn: Any, exc: BaseException) -> None:
        """Return ``conn`` to the pool after ``exc``: kept after an error reply or a refused
        argument (or already closed by the core after a ConnectionError), closed after
        anything else: interrupted mid-command, the stream is out of step."""
        if not isinstance(exc, (*_KEEP_CONNECTION, ConnectionError)):
            conn.close()
        self._pool.put(conn)

    def _run_once_more(self, op: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        conn = self._pool.get()
        try:
            result = op(conn, *args)
        except BaseException as exc:
            self._release_after(conn, exc)
            raise
        self._pool.put(conn)
        return result

    def execute(self, *args: Any) -> Any:
        """Run one command, e.g. ``client.execute("SET", "k", 1)``; error replies raise.

        Commands that would change the pooled connection's state (``MULTI``, ``SUBSCRIBE``,
        ``SELECT``, ... the list is in README) raise :class:`~fastlock.ArgumentError`, unsent.
        """
        _refuse_connection_state(args)
        return self._run(self._core.Connection.execute, args)

    def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command (``BZPOPMIN``, ``BLMOVE``, ...) that may wait up to
        ``timeout`` seconds on the server. Pass the same wait in the command's own
        arguments. The socket read of this one call waits ``timeout`` plus the client's
        ``socket_timeout``, and at least :data:`BLOCKING_MARGIN` more, whatever the
        ``socket_timeout`` is (``None`` included)."""
        _refuse_connection_state(args)
        normal = self.params.socket_timeout
        return self._run(_execute_blocking, args, timeout + max(normal or 0.0, BLOCKING_MARGIN), normal)

    def evalsha(self, sha: str | bytes, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """Run ``EVALSHA`` of an already loaded script."""
        return self._run(self._core.Connection.evalsha, sha, keys, args)

    def pipeline(self) -> Pipeline:
        """Collect commands and send them in one write."""
        return Pipeline(self)

    def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` (each refused like in :meth:`execute`) in one write and return
        their replies in order, error replies in place as ``ResponseError`` instances."""
        for args in commands:
            _refuse_connection_state(args)
        return list(self._run(self._core.Connection.pipeline, list(commands))) if commands else []

    def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` with blocking calls."""
        return drive(self, operation)

    def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` with ``keys`` and ``args`` and return its reply.

        ``busy_timeout`` overrides the client's for this call. Raises a
        :class:`~fastlock.LuaError` when the script fails, :class:`~fastlock.ScriptBusyError`
        when the server stays busy, :class:`~fastlock.ScriptNotFoundError` for an unknown name.
        """
        try:
            script = self._loaded[name]
        except KeyError:
            script = self.scripts.get(name)
        if script.meta:
            args = [*args, *(_META_VALUES[field](self, script) for field in script.meta)]
        pool = self._pool
        start = monotonic()
        conn = pool.get(start)
        try:
            result = self._evalsha(conn, script.sha, keys, args)
        except BaseException as exc:  # noqa: BLE001 - recovered or re-raised by _script_failed
            result = self._script_failed(conn, exc, script, keys, args, start, busy_timeout)
        else:
            pool.put(conn)
        elapsed = monotonic() - start
        durations = script.stats.durations
        durations.append(elapsed)
        if len(durations) >= ScriptStats.FOLD_AT:
            script.stats.fold()
        if self.debug:
            _log.debug("script %s took %.3f ms", name, elapsed * 1e3)
        return result

    def script(self, name: str) -> BoundScript:
        """Script ``name`` as a callable: ``client.script(name)(keys, args)``."""
        return BoundScript(self, self.scripts.get(name))

    def register_script(self, source: str | bytes, name: str | None = None) -> BoundScript:
        """Register ``source`` (includes and ``#meta`` allowed) as script ``name`` (default
        ``script_<sha1 prefix>``) and return it as a callable."""
        text = source.decode() if isinstance(source, bytes) else source
        name = name or f"script_{hashlib.sha1(text.encode()).hexdigest()[:16]}"
        return BoundScript(self, self.scripts.add(name, text))

    def script_stats(self) -> dict[str, ScriptCounters]:
        """Counters of every script rendered so far, by name."""
        return {name: script.stats.snapshot() for name, script in self._loaded.items()}

    @property
    def server_version(self) -> str:
        """The server's ``redis_version`` (Valkey: its Redis compatibility version), read
        once and again after a ``NOSCRIPT`` (the server may have changed)."""
        version = self._server_version
        if version is None:
            info = self.execute("INFO", "server").decode()
            version = self._server_version = info.partition("redis_version:")[2].split()[0]
        return version

    def _script_failed(
        self,
        conn: Any,
        exc: BaseException,
        script: Script,
        keys: Sequence[Any],
        args: Sequence[Any],
        start: float,
        busy_timeout: float | None,
    ) -> Any:
        """Slow path of :meth:`call`: the connection policy of :meth:`_run`, then recovery
        from NOSCRIPT/BUSY, or the rewritten error."""
        try:
            try:
                return self._after_failure(conn, exc, self._evalsha, (script.sha, keys, args))
            except ResponseError as reply:
                return self._recover(script, keys, args, reply, start, busy_timeout)
        except BaseException as failure:
            elapsed = monotonic() - start
            script.stats.record_error(elapsed)
            if self.debug:
                _log.debug("script %s failed after %.3f ms: %r", script.name, elapsed * 1e3, failure)
            raise

    def _recover(
        self,
        script: Script,
        keys: Sequence[Any],
        args: Sequence[Any],
        exc: ResponseError,
        start: float,
        busy_timeout: float | None,
    ) -> Any:
        reloads = 0
        delay = _BUSY_FIRST_DELAY
        kill_after = self.kill_busy_after
        while True:
            if isinstance(exc, NoScriptError) and reloads < MAX_RELOADS:
                reloads += 1
                script.stats.record_reload()
                self._server_version = None
                load = ("SCRIPT", "LOAD", script.body)
                loaded, reply = self._run(
                    self._core.Connection.pipeline, [load, ("EVALSHA", script.sha, len(keys), *keys, *args)]
                )
                if isinstance(loaded, ResponseError) and not isinstance(loaded, BusyError):
                    raise lua_error(loaded, script) from None  # e.g. it does not compile
                if not isinstance(reply, ResponseError):
                    return reply
                exc = reply
                continue
            if not isinstance(exc, BusyError):
                raise lua_error(exc, script) from None
            waited = monotonic() - start
            timeout = self.busy_timeout if busy_timeout is None else busy_timeout
            if waited >= timeout:
                raise ScriptBusyError(exc.text, script=script.name, waited=waited) from None
            if kill_after is not None and waited >= kill_after:
                kill_after = None
                if self._kill_busy_script(exc):
                    delay = 0.0
            time.sleep(min(random.uniform(delay / 2, delay), timeout - waited))
            delay = min(max(delay * 2, _BUSY_FIRST_DELAY), _BUSY_MAX_DELAY)
            try:
                return self._run(self._evalsha, script.sha, keys, args)
            except ResponseError as retry_exc:
                exc = retry_exc

    def _kill_busy_script(self, busy: BusyError) -> bool:
        """Send the kill the BUSY reply names; True when the server is no longer busy."""
        command = ("FUNCTION", "KILL") if "FUNCTION KILL" in busy.text else ("SCRIPT", "KILL")
        try:
            self.execute(*command)
        except NotBusyError:
            return True
        except UnkillableError:
            _log.warning("%s refused: the busy script has written; waiting for it", " ".join(command))
            return False
        _log.warning("sent %s to end another client's long-running script", " ".join(command))
        return True

    def queue(self, name: str, **options: Any) -> Queue:
        """A job queue on this client: ``options`` go to :class:`~fastlock.queues.queue.Queue`
        (``lease``, ``max_attempts``, ``backoff``, ``keep_completed``, ``prefix``)."""
        return Queue(self, name, **options)

    @functools.cached_property
    def locks(self) -> LockManager:
        """The default lock namespace (prefix ``fastlock``); build a
        :class:`~fastlock.LockManager` for other settings."""
        return LockManager(self)

    def lock(self, name: str | None = None, **options: Any) -> Lock:
        """A unique-job lock in :attr:`locks`: ``options`` go to :meth:`LockManager.lock
        <fastlock.LockManager.lock>` (``type``, ``ttl``, ``timeout``, ``limit``, ...)."""
        return self.locks.lock(name, **options)

    def close(self) -> None:
        """Close the pool's connections."""
        self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fastlock.Client {self.params.address} impl={self.impl}>"


def _command_word(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("latin-1").upper()
    return value.upper() if isinstance(value, str) else ""


def _refuse_connection_state(args: tuple[Any, ...]) -> None:
    """Raise ``ArgumentError`` for a command in :data:`_REFUSED` (name and, for ``CLIENT``,
    subcommand compared case-insensitively)."""
    if not args:
        return
    word = _command_word(args[0])
    if word == "CLIENT" and len(args) > 1:
        word = f"CLIENT {_command_word(args[1])}"
    instead = _REFUSED.get(word)
    if instead is not None:
        raise ArgumentError(
            f"{word} changes the state of the pooled connection it runs on, so later commands "
            f"on that connection would get wrong replies; fastlock refuses it: {instead}"
        )


def _execute_blocking(conn: Any, args: tuple[Any, ...], read_timeout: float, normal: float | None) -> Any:
    set_io_timeout(conn.sock, read_timeout)
    try:
        return conn.execute(args)
    finally:
        if not conn.broken:
            set_io_timeout(conn.sock, normal)


class Pipeline:
    """Commands queued with :meth:`execute_command` and sent in one write by :meth:`execute`."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute`); returns the pipeline
        so calls can be chained."""
        if not args:
            raise ValueError("a command needs at least its name")
        _refuse_connection_state(args)
        self._commands.append(args)
        return self

    def __len__(self) -> int:
        return len(self._commands)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        commands, self._commands = self._commands, []
        if not commands:
            return []
        client = self._client
        replies: list[Any] = client._run(client._core.Connection.pipeline, commands)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, ResponseError):
                    raise reply
        return replies

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._commands = []


class BoundScript:
    """A script bound to a client: ``bound(keys, args)`` is ``client.call(bound.name, keys, args)``."""

    __slots__ = ("client", "script")

    def __init__(self, client: Client, script: Script) -> None:
        self.client = client
        self.script = script

    @property
    def name(self) -> str:
        return self.script.name

    @property
    def sha(self) -> str:
        return self.script.sha

    def __call__(
        self, keys: Sequence[Any] = (), args: Sequence[Any] = (), *, busy_timeout: float | None = None
    ) -> Any:
        return self.client.call(self.script.name, keys, args, busy_timeout=busy_timeout)

    def __repr__(self) -> str:
        return f"<fastlock.BoundScript {self.script.name} sha={self.script.sha[:12]}>"
