"""The two cores (Cython ``fastlock._core``, pure-Python ``fastlock._core_py``): their typed
interface, and the choice between them: ``FASTLOCK_IMPL=cython|python``, else the best one;
:func:`default_core` is that choice made once, lazily, for the helpers without a client.

The interface is declared once, by the stub ``_core.pyi`` (stubtest checks it against both
cores): ``Core`` and the ``Core<Name>`` Protocols are written from it into ``_core_api.py``
(``tools/async_to_sync.py``) and re-exported here, where mypy checks both cores against them.
:class:`CorePool` is the other way round: what the cores' ``ScriptCaller`` needs of its pool.

Asking for an implementation that cannot be imported is an error; without a request the
Cython core is used when it imports and the pure-Python core otherwise.
"""

from __future__ import annotations

import collections
import functools
import importlib
import os
import queue
from typing import TYPE_CHECKING, Protocol, cast

from ._core_api import (
    Core,
    CoreCommandQueue,
    CoreConnection,
    CoreMuxCaller,
    CoreMuxConnection,
    CoreReplyReader,
    CoreScriptCaller,
    CoreSlotRouter,
)

__all__ = [
    "IMPLEMENTATIONS",
    "Core",
    "CoreCommandQueue",
    "CoreConnection",
    "CoreMuxCaller",
    "CoreMuxConnection",
    "CorePool",
    "CoreReplyReader",
    "CoreScriptCaller",
    "CoreSlotRouter",
    "core_of",
    "default_core",
    "load_core",
]


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


if TYPE_CHECKING:  # mypy checks both cores against the interface (a module's classes one by one)
    from . import _core as _cython
    from . import _core_py as _python

    _CORES: tuple[Core, ...] = (_cython, _python)
    _CONNECTIONS: tuple[type[CoreConnection], ...] = (_cython.Connection, _python.Connection)
    _READERS: tuple[type[CoreReplyReader], ...] = (_cython.ReplyReader, _python.ReplyReader)
    _CALLERS: tuple[type[CoreScriptCaller], ...] = (_cython.ScriptCaller, _python.ScriptCaller)
    _ROUTERS: tuple[type[CoreSlotRouter], ...] = (_cython.SlotRouter, _python.SlotRouter)
    _QUEUES: tuple[type[CoreCommandQueue], ...] = (_cython.CommandQueue, _python.CommandQueue)
    _MUX: tuple[type[CoreMuxConnection], ...] = (_cython.MuxConnection, _python.MuxConnection)
    _MUX_CALLERS: tuple[type[CoreMuxCaller], ...] = (_cython.MuxCaller, _python.MuxCaller)


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
