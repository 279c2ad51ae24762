"""``Client``: a pool of core connections, commands, pipelines and named Lua scripts.

Retry policy (the whole contract: docs/delivery.md): a command is resent on a fresh
connection only when the failed attempt provably never left the client
(``ConnectionError.sent`` is false). After a timeout or a connection lost once the
command was written, the error is raised: the server may have run it, and only the
caller can know whether running it twice is safe.

Scripts (:meth:`Client.call`) run by ``EVALSHA``, sent directly by the core's
``ScriptCaller`` (pool, call and stats without a Python frame); an error reply goes to
the recovery operation of :mod:`fastlock.scripts.calling` (NOSCRIPT reload, BUSY waits and
kills, Lua error reports), which :meth:`Client.run` drives. Call metadata and includes:
:mod:`fastlock.scripts.templates`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from time import monotonic
from typing import TYPE_CHECKING, Any, Unpack

from ..exceptions import ArgumentError, ArgumentTypeError, ConnectionError, ResponseError
from ..operations import Operation, Runner, T
from ..params import BLOCKING_MARGIN, DEFAULT_URL, blocking_wait
from ..protocol.commands import refuse_connection_state, refuse_each
from ..scripts.calling import (
    MAX_RELOADS,
    ScriptSettings,
    read_server_version,
    record_call,
    record_failure,
    recover,
)
from ..scripts.clients import ClientOptions, ClientShell
from ..scripts.registry import Script, ScriptRegistry, ScriptStats
from .access import LockQueueAccess
from .connect import open_connection, set_io_timeout
from .drive import drive
from .listener_slot import ListenerSlot
from .notify import Listener
from .pipeline import BoundScript, Pipeline
from .pool import ConnectionPool
from .script_calls import ScriptCalls

__all__ = [
    "BLOCKING_MARGIN",
    "MAX_RELOADS",
    "BoundScript",
    "Client",
    "LockQueueAccess",
    "Pipeline",
    "SyncClientOptions",
]

_KEEP_CONNECTION = (ResponseError, ArgumentError, ArgumentTypeError)


class SyncClientOptions(ClientOptions, total=False):
    """The options of :class:`Client`: the shared ones, its pool's ``max_connections``
    (default 50) and ``health_check_interval`` (seconds, default 1.0; ``None``: never)."""

    health_check_interval: float | None


class Client(
    ClientShell[BoundScript, ConnectionPool], LockQueueAccess, ScriptCalls, AbstractContextManager["Client"]
):
    """A Redis/Valkey client for hot loops.

    ``url`` is ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` for TLS or
    ``unix:///path.sock?db=N``. The keyword ``options`` (:class:`SyncClientOptions`) are
    ``max_connections``, ``health_check_interval``, ``impl``, ``pool_timeout``, the script
    settings below and connection parameters that override what the URL says (see
    :class:`~fastlock.params.ConnectionParams`). ``impl`` picks the core (``"cython"`` or
    ``"python"``; default ``FASTLOCK_IMPL`` or the best available). ``max_connections``
    (default 50) bounds the pool, whose ``get`` waits ``pool_timeout`` seconds (default 5)
    for a free one; ``health_check_interval`` (seconds, default 1.0) is the idle time after
    which a connection is checked before reuse.

    Scripts: ``script_paths`` are folders searched before the built-in one; ``debug``
    makes scripts write their debug lines to the server log and logs every call's name
    and duration on the ``fastlock.scripts`` logger at DEBUG; ``max_history`` is passed
    to scripts that declare it; ``busy_timeout`` (seconds) bounds the wait while the
    server is busy with another script; ``kill_busy_after`` (seconds, default never)
    sends ``SCRIPT KILL`` once a call has waited that long; ``warm_up`` loads every
    script on each new connection (in the write of its handshake). The four script settings are
    kept in :attr:`script_settings` (also readable and settable as attributes of the client).
    """

    kind = "fastlock.Client"
    bound = BoundScript
    pool_options = (("max_connections", "max_size"), ("health_check_interval", "health_check_interval"))

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[SyncClientOptions]) -> None:
        self._scripts, self._settings, sizes = self._configure(url, options)
        self._evalsha = self._core.Connection.evalsha
        self._pool = ConnectionPool(self._open, **sizes)
        self._caller = self._observed(
            self._core.ScriptCaller(
                self._pool,
                self._scripts,
                self._settings,
                self._with_meta,
                self._script_failed,
                record_call,
                ScriptStats.FOLD_AT,
            )
        )
        self._call = self._caller.call
        self._bind_call()
        self._listeners: ListenerSlot[Listener] = ListenerSlot()

    def _open(self) -> Any:
        return open_connection(self.params, self._core, self._first_load())

    @property
    def scripts(self) -> ScriptRegistry:
        """The script registry (set it to share another client's)."""
        return self._scripts

    @scripts.setter
    def scripts(self, scripts: ScriptRegistry) -> None:
        self._scripts = scripts
        self._caller.use(scripts, self._settings)

    @property
    def script_settings(self) -> ScriptSettings:
        """The script-call policy (:class:`~fastlock.scripts.calling.ScriptSettings`; set it
        to share another client's)."""
        return self._settings

    @script_settings.setter
    def script_settings(self, settings: ScriptSettings) -> None:
        self._settings = settings
        self._caller.use(self._scripts, settings)

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
        refuse_connection_state(args)
        return self._run(self._core.Connection.execute, args)

    def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command (``BZPOPMIN``, ``BLMOVE``, ...) that may wait up to
        ``timeout`` seconds on the server. Pass the same wait in the command's own
        arguments. The socket read of this one call waits ``timeout`` plus the client's
        ``socket_timeout``, and at least :data:`BLOCKING_MARGIN` more, whatever the
        ``socket_timeout`` is (``None`` included)."""
        refuse_connection_state(args)
        normal = self.params.socket_timeout
        return self._run(_execute_blocking, args, blocking_wait(timeout, normal), normal)

    def _execute_blocking_many(self, commands: list[tuple[Any, ...]], timeout: float) -> list[Any]:
        """``commands`` ending with a blocking one, in one write on one connection (the
        cluster's ``ASKING``, which holds for the next command on its connection only); their
        replies, errors in place."""
        normal = self.params.socket_timeout
        return list(self._run(_pipeline_blocking, commands, blocking_wait(timeout, normal), normal))

    def evalsha(self, sha: str | bytes, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """Run ``EVALSHA`` of an already loaded script."""
        return self._run(self._core.Connection.evalsha, sha, keys, args)

    def pipeline(self) -> Pipeline:
        """Collect commands and script calls and send them in one write."""
        return Pipeline(self, functools.partial(self._core.CommandQueue, self._caller), self._send_batch)

    def _send_batch(self, batch: Any) -> list[Any]:
        replies: list[Any] = self._run(self._core.Connection.send_batch, batch)
        return replies

    def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` (each refused like in :meth:`execute`) in one write and return
        their replies in order, error replies in place as ``ResponseError`` instances."""
        refuse_each(commands)
        return list(self._run(self._core.Connection.pipeline, list(commands))) if commands else []

    def run(self, operation: Operation[T]) -> T:
        """Run a multi-step :data:`~fastlock.operations.Operation` with blocking calls."""
        return drive(self, operation)

    @property
    def server_version(self) -> str:
        """The server's ``redis_version`` (Valkey: its Redis compatibility version), read
        once and again after a ``NOSCRIPT`` (the server may have changed)."""
        return self.script_settings.server_version or self.run(read_server_version(self.script_settings))

    @property
    def listener(self) -> Listener:
        """This process's wake-up listener of the client's waiting lock acquirers (one
        connection and reader thread, made at the first wait; :mod:`fastlock.sync.notify`)."""
        return self._listeners.get(lambda: Listener(self.params, self._core, self))

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
        """Slow path of :meth:`call` (the core's ``ScriptCaller`` hands over a call that
        raised): the connection policy of :meth:`_run`, then the recovery operation
        (NOSCRIPT, BUSY, the rewritten error)."""
        settings = self.script_settings
        try:
            try:
                return self._after_failure(conn, exc, self._evalsha, (script.sha, keys, args))
            except ResponseError as reply:
                return self.run(recover(script, keys, args, reply, start, settings, busy_timeout))
        except BaseException as failure:
            record_failure(script, settings, monotonic() - start, failure)
            raise

    def close(self) -> None:
        """Close the pool's connections and the listener's."""
        self._listeners.close()
        self._pool.close()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _execute_blocking(conn: Any, args: tuple[Any, ...], read_timeout: float, normal: float | None) -> Any:
    set_io_timeout(conn.sock, read_timeout)
    try:
        return conn.execute(args)
    finally:
        if not conn.broken:
            set_io_timeout(conn.sock, normal)


def _pipeline_blocking(
    conn: Any, commands: list[tuple[Any, ...]], read_timeout: float, normal: float | None
) -> Any:
    set_io_timeout(conn.sock, read_timeout)
    try:
        return conn.pipeline(commands)
    finally:
        if not conn.broken:
            set_io_timeout(conn.sock, normal)


if TYPE_CHECKING:
    _RUNNER: type[Runner] = Client  # mypy checks that a Client is a Runner
