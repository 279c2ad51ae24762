"""The two cores (Cython ``fastlock._core``, pure-Python ``fastlock._core_py``): their typed
interface, and the choice between them: ``FASTLOCK_IMPL=cython|python``, else the best one;
:func:`default_core` is that choice made once, lazily, for the helpers without a client.

Asking for an implementation that cannot be imported is an error; without a request the
Cython core is used when it imports and the pure-Python core otherwise.
"""

from __future__ import annotations

import collections
import functools
import importlib
import os
import queue
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

__all__ = [
    "IMPLEMENTATIONS",
    "Core",
    "CoreCommandQueue",
    "CoreConnection",
    "CorePool",
    "CoreReader",
    "CoreScriptCaller",
    "CoreSlotRouter",
    "core_of",
    "default_core",
    "load_core",
]

T = TypeVar("T")


class CoreReader(Protocol):
    """An incremental RESP reply reader (``ReplyReader``)."""

    def feed(self, data: Any, offset: int = 0, length: int = -1) -> None: ...
    def has_data(self) -> bool: ...
    def gets(self) -> Any: ...


class CoreConnection(Protocol):
    """A blocking connection to one server (``Connection``)."""

    last_used: float
    generation: int

    def __init__(self, sock: socket.socket) -> None: ...
    @property
    def sock(self) -> socket.socket: ...
    @property
    def broken(self) -> bool: ...
    @property
    def round_trips(self) -> int: ...
    def close(self) -> None: ...
    def execute(self, args: tuple[Any, ...]) -> Any: ...
    def evalsha(self, sha: str | bytes, keys: Iterable[Any], args: Iterable[Any]) -> Any: ...
    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]: ...
    def send_batch(self, batch: Any) -> list[Any]: ...


class CorePool(Protocol):
    """What a ``ScriptCaller`` uses of its pool (``fastlock.sync.pool.ConnectionPool``): it
    takes idle connections itself and hands back the ones it cannot keep; see the pool."""

    health_check_interval: float | None
    generation: int
    waiters: int

    @property
    def idle_connections(self) -> collections.deque[CoreConnection]: ...
    @property
    def wakeups(self) -> queue.SimpleQueue[None]: ...
    def get(self, now: float | None = None) -> CoreConnection: ...
    def put(self, conn: CoreConnection) -> None: ...
    def revive(self, conn: CoreConnection) -> CoreConnection: ...


class CoreScriptCaller(Protocol):
    """``Client.call`` itself (``ScriptCaller``): lookup, meta values, pool, EVALSHA, stats."""

    def __init__(
        self,
        pool: CorePool,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        failed: Callable[..., Any],
        record: Callable[..., Any],
        fold_at: int,
    ) -> None: ...
    def use(self, scripts: Any, settings: Any) -> None: ...
    def call(
        self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None
    ) -> Any: ...
    def call_script(
        self, script: Any, keys: Any, args: Any, settings: Any, busy_timeout: float | None
    ) -> Any: ...


class CoreSlotRouter(Protocol):
    """``ClusterClient.call`` (``SlotRouter``): lookup, meta values, slot, node, ``ScriptCaller``."""

    def __init__(
        self,
        scripts: Any,
        settings: Any,
        with_meta: Callable[..., Any],
        slots: dict[Any, int],
        routes: list[Any],
        slot_of: Callable[[Any], int],
        route: Callable[[int], Any],
        failed: Callable[..., Any],
    ) -> None: ...
    def call(
        self, name: str, keys: Any = (), args: Any = (), *, busy_timeout: float | None = None
    ) -> Any: ...


class CoreCommandQueue(Protocol):
    """A pipeline's queue (``CommandQueue``): commands and script calls encoded as they are queued."""

    def __init__(self, caller: Any, owner: Any) -> None: ...
    def __len__(self) -> int: ...
    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any: ...
    def command(self, args: tuple[Any, ...]) -> Any: ...
    def call_at(self, i: int) -> tuple[Any, Any, Any] | None: ...
    def errors(self, replies: list[Any]) -> list[int]: ...
    def evals(self) -> list[int]: ...
    def set_loaded(self, i: int, loaded: bool) -> None: ...
    def clear(self) -> None: ...


class Core(Protocol):
    """A core module: the encoders, the reader and the connection."""

    @property
    def DEBUG(self) -> bool: ...
    @property
    def NOT_ENOUGH(self) -> Any: ...
    @property
    def CommandQueue(self) -> type[CoreCommandQueue]: ...
    @property
    def Connection(self) -> type[CoreConnection]: ...
    @property
    def ReplyReader(self) -> type[CoreReader]: ...
    @property
    def ScriptCaller(self) -> type[CoreScriptCaller]: ...
    @property
    def SlotRouter(self) -> type[CoreSlotRouter]: ...
    def encode_command(self, *args: Any) -> bytes: ...
    def encode_evalsha(self, sha: str | bytes, keys: Iterable[Any], args: Iterable[Any]) -> bytes: ...
    def encode_pipeline(self, commands: Iterable[tuple[Any, ...]]) -> bytes: ...
    # the domain helpers (``_coreparts/domain_*``), for digest.py, locks/, queues/ and _ids.py
    def _canonical_json(self, name: str, queue: str | None, args: Any) -> bytes | None: ...
    def _is_digest(self, value: object) -> bool: ...
    def _digest_bucket(self, digest: str, buckets: int) -> int: ...
    def _lock_scope(
        self, space: Any, scope_type: type[T], digest: str, suffix: str, limit: int
    ) -> T | None: ...
    def _lock_spec(
        self,
        lock_type: Any,
        specs: dict[Any, Any],
        names: dict[Any, Any],
        no_strategies: Any,
        max_duration: float,
        max_limit: int,
    ) -> None: ...
    def _lock_new(
        self,
        cls: type[T],
        manager: Any,
        digest: str,
        name: str | None,
        kind: Any,
        ttl: float | None,
        timeout: float,
        limit: int,
        job_id: str | None,
        on_conflict: Any,
    ) -> T: ...
    def _claimed_jobs(self, reply: Any, job_type: type[Any], batch_type: type[T]) -> T | None: ...
    def _numbered(self, head: str, numbers: Iterator[int], n: int) -> list[str]: ...


if TYPE_CHECKING:  # mypy checks both cores against the interface (a module's classes one by one)
    from . import _core as _cython
    from . import _core_py as _python

    _CORES: tuple[Core, ...] = (_cython, _python)
    _CONNECTIONS: tuple[type[CoreConnection], ...] = (_cython.Connection, _python.Connection)
    _READERS: tuple[type[CoreReader], ...] = (_cython.ReplyReader, _python.ReplyReader)
    _CALLERS: tuple[type[CoreScriptCaller], ...] = (_cython.ScriptCaller, _python.ScriptCaller)
    _ROUTERS: tuple[type[CoreSlotRouter], ...] = (_cython.SlotRouter, _python.SlotRouter)
    _QUEUES: tuple[type[CoreCommandQueue], ...] = (_cython.CommandQueue, _python.CommandQueue)


IMPLEMENTATIONS = {"cython": "fastlock._core", "python": "fastlock._core_py"}


def load_core(name: str | None = None) -> tuple[str, Core]:
    """Return ``(name, module)`` of the requested core, or the best available one."""
    requested = name or os.environ.get("FASTLOCK_IMPL", "").strip().lower() or None
    if requested is not None:
        if requested not in IMPLEMENTATIONS:
            raise ImportError(
                f"unknown fastlock implementation {requested!r}; choose one of {', '.join(IMPLEMENTATIONS)}"
            )
        try:
            return requested, _import(IMPLEMENTATIONS[requested])
        except ImportError as exc:
            raise ImportError(f"fastlock implementation {requested!r} cannot be imported: {exc}") from exc
    failures = []
    for impl, module in IMPLEMENTATIONS.items():
        try:
            return impl, _import(module)
        except ImportError as exc:
            failures.append(f"{impl}: {exc}")
    raise ImportError("no fastlock implementation can be imported: " + "; ".join(failures))


@functools.cache
def default_core() -> Core:
    """The process's default core (``load_core()``), chosen once, at the first use: for the
    module-level helpers that run without a client (a client uses its own, ``impl=``)."""
    return load_core()[1]


@functools.cache
def _named(impl: str) -> Core:
    """The core ``impl`` (``cython`` or ``python``), imported once."""
    return load_core(impl)[1]


def core_of(runner: object) -> Core:
    """The core of ``runner``: the one a fastlock client names by its ``impl`` (``Client(impl=...)``),
    else (any other :class:`~fastlock.operations.Runner`) the process default. The domain layer
    (lock namespaces, queues) takes its core from here, once per namespace or queue."""
    impl = getattr(runner, "impl", None)
    return _named(impl) if isinstance(impl, str) else default_core()


def _import(module: str) -> Core:
    """The core module ``module``, typed by the interface both cores implement."""
    return cast("Core", importlib.import_module(module))
