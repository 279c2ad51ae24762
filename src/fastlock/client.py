"""``Client``: a pool of core connections, commands, pipelines and EVALSHA scripts.

Retry policy: a command is resent on a fresh connection only when the failed attempt
provably never left the client (``ConnectionError.sent`` is false). After a timeout or
a connection lost once the command was written, the error is raised: the server may
have run it, and only the caller can know whether running it twice is safe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._impl import load_core
from .connection import DEFAULT_URL, ConnectionParams, open_connection, parse_url, set_io_timeout
from .exceptions import ArgumentError, ArgumentTypeError, ConnectionError, NoScriptError, ResponseError
from .pool import ConnectionPool

__all__ = ["Client", "Pipeline", "Script"]

_KEEP_CONNECTION = (ResponseError, ArgumentError, ArgumentTypeError)


class Client:
    """A Redis/Valkey client for hot loops.

    ``url`` is ``redis://[user:password@]host[:port][/db]``, ``rediss://...`` for TLS or
    ``unix:///path.sock?db=N``; keyword arguments override what the URL says (see
    :class:`~fastlock.connection.ConnectionParams`). ``impl`` picks the core
    (``"cython"`` or ``"python"``; default ``FASTLOCK_IMPL`` or the best available).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        impl: str | None = None,
        max_connections: int = 50,
        pool_timeout: float | None = 5.0,
        health_check_interval: float | None = 1.0,
        **params: Any,
    ) -> None:
        self.impl, self._core = load_core(impl)
        self.params: ConnectionParams = parse_url(url, **params)
        self._pool = ConnectionPool(
            self._open,
            max_size=max_connections,
            timeout=pool_timeout,
            health_check_interval=health_check_interval,
        )

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> Client:
        """Build a client for the same server, database, credentials and TLS settings as
        a redis-py (or valkey-py) client. ``kwargs`` go to :class:`Client`."""
        from .compat import params_from_redis

        params = params_from_redis(redis_client)
        return cls(**{**params, **kwargs})

    def _open(self) -> Any:
        return open_connection(self.params, self._core)

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
        """Keep the connection after an error reply or a refused argument, discard it after
        anything else; retry once on a fresh connection only if nothing was sent."""
        if not isinstance(exc, (*_KEEP_CONNECTION, ConnectionError)):
            conn.close()  # interrupted mid-command: the stream is out of step
        self._pool.put(conn)
        if isinstance(exc, ConnectionError) and not exc.sent:
            return self._run_once_more(op, args)
        raise exc

    def _run_once_more(self, op: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        conn = self._pool.get()
        try:
            return op(conn, *args)
        except BaseException as exc:
            if not isinstance(exc, (*_KEEP_CONNECTION, ConnectionError)):
                conn.close()
            raise
        finally:
            self._pool.put(conn)

    def execute(self, *args: Any) -> Any:
        """Run one command, e.g. ``client.execute("SET", "k", 1)``; error replies raise."""
        return self._run(self._core.Connection.execute, args)

    def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command (``BZPOPMIN``, ``BLMOVE``, ...) that may wait up to
        ``timeout`` seconds on the server: the read timeout of this one call is extended by
        ``timeout``. Pass the same wait in the command's own arguments."""
        normal = self.params.socket_timeout
        return self._run(_execute_blocking, args, timeout + (normal or 0.0), normal)

    def evalsha(self, sha: str | bytes, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """Run ``EVALSHA`` of an already loaded script."""
        return self._run(self._core.Connection.evalsha, sha, keys, args)

    def pipeline(self) -> Pipeline:
        """Collect commands and send them in one write."""
        return Pipeline(self)

    def register_script(self, source: str | bytes) -> Script:
        """Return a callable running ``source`` by EVALSHA (loaded on first NOSCRIPT)."""
        return Script(self, source)

    def close(self) -> None:
        """Close the pool's connections."""
        self._pool.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<fastlock.Client {self.params.address} impl={self.impl}>"


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
        """Queue one command; returns the pipeline so calls can be chained."""
        if not args:
            raise ValueError("a command needs at least its name")
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


class Script:
    """A Lua script run by ``EVALSHA``; ``SCRIPT LOAD`` is sent only after ``NOSCRIPT``.

    NOSCRIPT means the script did not run, so running it again after the load can never
    execute it twice.
    """

    def __init__(self, client: Client, source: str | bytes) -> None:
        self._client = client
        self.source = source.encode() if isinstance(source, str) else bytes(source)
        self.sha = hashlib.sha1(self.source).hexdigest()

    def __call__(self, keys: Iterable[Any] = (), args: Iterable[Any] = ()) -> Any:
        client = self._client
        evalsha = client._core.Connection.evalsha
        try:
            return client._run(evalsha, self.sha, keys, args)
        except NoScriptError:
            client.execute("SCRIPT", "LOAD", self.source)
            return client._run(evalsha, self.sha, keys, args)
