"""What the sync and the asyncio client share, transport-neutral: :class:`ClientOptions`
(the keyword options both take, declared once) and :class:`ClientShell` (reading them, the
script settings as attributes, the warm-up load, ``from_redis`` and ``repr``)."""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, Protocol, Self, TypedDict, TypeVar

from .. import metrics
from .._impl import load_core
from ..params import ConnectionParams, Load, parse_url
from ..protocol.arguments import unknown_options
from .calling import (
    ScriptSettings,
    ScriptSettingsAccess,
    check_loaded,
    load_commands,
    observed_calls,
    register,
)
from .registry import Script, ScriptRegistry

__all__ = ["ClientOptions", "ClientShell"]

B = TypeVar("B")
P = TypeVar("P")


class Observable(Protocol):
    """A core's caller: ``observe(gate, key, on_call)`` reports each call (see ``ScriptCaller``)."""

    def observe(
        self, gate: Callable[[], Any] | None, key: str, on_call: Callable[[str, float], None] | None
    ) -> None: ...


C = TypeVar("C", bound=Observable)


class ClientOptions(TypedDict, total=False):
    """The keyword options of both clients (defaults in :data:`DEFAULTS`): ``impl`` picks
    the core (``"cython"`` or ``"python"``; default ``FASTLOCK_IMPL`` or the best available);
    ``pool_timeout`` bounds the wait for a connection, ``max_connections`` the pool (its
    default is the transport's: :class:`~fastlock.sync.client.SyncClientOptions`,
    :class:`~fastlock.aio.client.AsyncClientOptions`); the script settings (see
    :class:`fastlock.Client`); and any :class:`~fastlock.params.ConnectionParams` field,
    which overrides what the URL says."""

    impl: str | None
    pool_timeout: float | None
    max_connections: int
    script_paths: Iterable[str | os.PathLike[str]]
    debug: bool
    max_history: int
    busy_timeout: float
    kill_busy_after: float | None
    warm_up: bool
    host: str
    port: int
    path: str | None
    db: int
    username: str | None
    password: str | None
    ssl_context: ssl.SSLContext | None
    connect_timeout: float | None
    socket_timeout: float | None
    client_name: str | None


DEFAULTS: dict[str, Any] = {
    "impl": None,
    "pool_timeout": 5.0,
    "script_paths": (),
    "debug": False,
    "max_history": 1000,
    "busy_timeout": 5.0,
    "kill_busy_after": None,
    "warm_up": False,
}
"""The client options' defaults (the rest, connection parameters, default to the URL's)."""

OPTIONS = ClientOptions.__optional_keys__
"""The names of :class:`ClientOptions` (a transport adds its pool's)."""


class ClientShell(ScriptSettingsAccess, Generic[B, P]):
    """Under both clients: :meth:`_configure` reads the :class:`ClientOptions`; then the
    scripts as callables (``B``, built by ``bound(client, script)``), the connection pool
    (``P``), ``from_redis`` and ``repr``."""

    kind: ClassVar[str]
    pool_options: ClassVar[tuple[tuple[str, str], ...]]
    """The transport's options that go to its pool: (the option, the pool's keyword) each."""
    bound: Callable[[Any, Script], B]
    _pool: P
    impl: str
    params: ConnectionParams
    _warm_up: bool

    @staticmethod
    def _observed(caller: C) -> C:
        """``caller`` (the core's ``ScriptCaller`` or ``MuxCaller``) reporting each call to the
        metrics observer installed now, if that observer asks for it (a tracer), in the core."""
        observed = observed_calls(metrics.observer)
        if observed is not None:
            caller.observe(*observed)
        return caller

    def _configure(
        self, url: str, options: Mapping[str, Any]
    ) -> tuple[ScriptRegistry, ScriptSettings, dict[str, Any]]:
        """Set :attr:`impl`, the core and :attr:`params`; return the script registry and
        settings, and the pool's keyword arguments: ``timeout`` (``pool_timeout``) and those
        of :attr:`pool_options` given (the pool's own defaults for the others)."""
        pool = dict(self.pool_options)
        unknown = options.keys() - OPTIONS - pool.keys()
        if unknown:
            raise unknown_options(unknown, OPTIONS | pool.keys(), "client")
        chosen: dict[str, Any] = {**DEFAULTS, **options}
        sizes = {keyword: chosen.pop(key) for key, keyword in pool.items() if key in options}
        overrides = {key: chosen.pop(key) for key in options if key not in DEFAULTS and key in chosen}
        self.impl, self._core = load_core(chosen["impl"])
        self.params = parse_url(url, **overrides)
        self._warm_up = bool(chosen["warm_up"])
        settings = ScriptSettings(
            chosen["busy_timeout"], chosen["kill_busy_after"], chosen["debug"], chosen["max_history"]
        )
        return ScriptRegistry(chosen["script_paths"]), settings, {"timeout": chosen["pool_timeout"], **sizes}

    @classmethod
    def from_redis(cls, redis_client: Any, **kwargs: Any) -> Self:
        """A client for the same server, database, credentials, timeouts and TLS settings as
        a redis-py (or valkey-py) client, blocking or ``asyncio``. ``kwargs`` go to the
        constructor. redis-py's default ``socket_timeout=None`` is kept: ordinary commands wait
        for ever, blocking waits still end by their own timeout (``execute_blocking``)."""
        from ..interop.redis_py import params_from_redis

        return cls(**{**params_from_redis(redis_client), **kwargs})

    @property
    def pool(self) -> P:
        """The connection pool (its sizes, settings and counts)."""
        return self._pool

    def script(self, name: str) -> B:
        """Script ``name`` as a callable: ``client.script(name)(keys, args)`` (awaited on an
        asyncio client)."""
        return self.bound(self, self.scripts.get(name))

    def register_script(self, source: str | bytes, name: str | None = None) -> B:
        """Register ``source`` (includes and ``#meta`` allowed) as script ``name`` (default
        ``script_<sha1 prefix>``) and return it as a callable (awaited on an asyncio client)."""
        return self.bound(self, register(self.scripts, source, name))

    def _warm_up_load(self) -> Load:
        """Warm-up: the commands loading every script in one write, and the check of their
        replies (it raises the first failed load's :class:`~fastlock.LuaError`)."""
        scripts = self.scripts.load_all()
        return load_commands(scripts), functools.partial(check_loaded, scripts)

    def _first_load(self) -> Load | None:
        """What a new connection sends after its handshake, in the same write: the warm-up
        load with ``warm_up=True``, else nothing."""
        return self._warm_up_load() if self._warm_up else None

    def __repr__(self) -> str:
        return f"<{self.kind} {self.params.address} impl={self.impl}>"
