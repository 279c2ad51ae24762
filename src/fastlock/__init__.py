"""fastlock: fast, safe atomic Redis operations from Python.

``fastlock.__impl__`` names the active core: ``"cython"`` or ``"python"``
(``FASTLOCK_IMPL`` chooses; asking for one that cannot be imported is an error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._impl import load_core
from .digest import Digester
from .exceptions import (
    ArgumentError,
    ArgumentTypeError,
    AskError,
    AuthenticationError,
    BusyError,
    ClusterDownError,
    ConnectionError,
    CrossSlotError,
    DuplicateJob,
    ExecAbortError,
    FastlockError,
    JobCancelled,
    LeaseLost,
    LoadingError,
    LockConflictError,
    LockError,
    LockNotOwnedError,
    LuaCommandError,
    LuaCompileError,
    LuaError,
    LuaOutOfMemoryError,
    LuaRaisedError,
    LuaReadOnlyError,
    LuaWrongTypeError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    NotBusyError,
    OutOfMemoryError,
    PoolTimeoutError,
    ProtocolError,
    QueueError,
    ReadOnlyError,
    ResponseError,
    ScriptBusyError,
    ScriptError,
    ScriptNotFoundError,
    ScriptNotRunError,
    TemplateError,
    TimeoutError,
    TryAgainError,
    UnkillableError,
    UnknownOptionError,
    UsageError,
    WrongTypeError,
)
from .limits.base import Decision
from .limits.limiter import Limiter
from .locks.conflict import Conflict
from .locks.keys import LockEntry
from .locks.lock import Lock
from .locks.manager import LockManager
from .locks.reaper import Reaper
from .locks.rwlock import RWLock, RWSide
from .locks.types import Holder, LockInfo, LockType
from .params import ConnectionParams, parse_url
from .queues.jobs import Batch, Job, Unique
from .queues.outcomes import DeadLetter, JobTimeout, Retry
from .queues.queue import Queue
from .queues.worker import Worker
from .scripts.registry import Script, ScriptCounters, ScriptRegistry
from .sync.client import BoundScript, Client, Pipeline
from .sync.pool import ConnectionPool

if TYPE_CHECKING:
    from .aio.client import Client as AsyncClient

__impl__, _core = load_core()
__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AskError",
    "AsyncClient",
    "AuthenticationError",
    "Batch",
    "BoundScript",
    "BusyError",
    "Client",
    "ClusterDownError",
    "Conflict",
    "ConnectionError",
    "ConnectionParams",
    "ConnectionPool",
    "CrossSlotError",
    "Decision",
    "Digester",
    "DuplicateJob",
    "ExecAbortError",
    "FastlockError",
    "Holder",
    "Job",
    "JobCancelled",
    "LeaseLost",
    "Limiter",
    "LoadingError",
    "Lock",
    "LockConflictError",
    "LockEntry",
    "LockError",
    "LockInfo",
    "LockManager",
    "LockNotOwnedError",
    "LockType",
    "LuaCommandError",
    "LuaCompileError",
    "LuaError",
    "LuaOutOfMemoryError",
    "LuaRaisedError",
    "LuaReadOnlyError",
    "LuaWrongTypeError",
    "MovedError",
    "NoPermissionError",
    "NoScriptError",
    "NotBusyError",
    "OutOfMemoryError",
    "Pipeline",
    "PoolTimeoutError",
    "ProtocolError",
    "Queue",
    "QueueError",
    "ReadOnlyError",
    "Reaper",
    "ResponseError",
    "RWLock",
    "RWSide",
    "Script",
    "ScriptBusyError",
    "ScriptCounters",
    "ScriptError",
    "ScriptNotFoundError",
    "ScriptNotRunError",
    "ScriptRegistry",
    "TemplateError",
    "TimeoutError",
    "TryAgainError",
    "Unique",
    "UnkillableError",
    "UnknownOptionError",
    "UsageError",
    "Worker",
    "WrongTypeError",
    "__impl__",
    "parse_url",
    "DeadLetter",
    "JobTimeout",
    "Retry",
]


def __getattr__(name: str) -> Any:
    """``fastlock.AsyncClient`` (:class:`fastlock.aio.Client`), imported on first use: a
    program that never touches asyncio does not import it."""
    if name == "AsyncClient":
        from .aio.client import Client

        return Client
    raise AttributeError(f"module 'fastlock' has no attribute {name!r}")
