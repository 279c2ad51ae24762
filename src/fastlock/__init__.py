"""fastlock: fast, safe atomic Redis operations from Python.

``fastlock.__impl__`` names the active core: ``"cython"`` or ``"python"``
(``FASTLOCK_IMPL`` chooses; asking for one that cannot be imported is an error).
"""

from __future__ import annotations

from ._impl import load_core
from .client import Client, Pipeline, Script
from .connection import ConnectionParams, parse_url
from .exceptions import (
    ArgumentError,
    ArgumentTypeError,
    AskError,
    AuthenticationError,
    BusyError,
    ClusterDownError,
    ConnectionError,
    CrossSlotError,
    ExecAbortError,
    FastlockError,
    LoadingError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    NotBusyError,
    OutOfMemoryError,
    PoolTimeoutError,
    ProtocolError,
    ReadOnlyError,
    ResponseError,
    ScriptError,
    TimeoutError,
    TryAgainError,
    UnkillableError,
    WrongTypeError,
)
from .pool import ConnectionPool

__impl__, _core = load_core()
__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AskError",
    "AuthenticationError",
    "BusyError",
    "Client",
    "ClusterDownError",
    "ConnectionError",
    "ConnectionParams",
    "ConnectionPool",
    "CrossSlotError",
    "ExecAbortError",
    "FastlockError",
    "LoadingError",
    "MovedError",
    "NoPermissionError",
    "NoScriptError",
    "NotBusyError",
    "OutOfMemoryError",
    "Pipeline",
    "PoolTimeoutError",
    "ProtocolError",
    "ReadOnlyError",
    "ResponseError",
    "Script",
    "ScriptError",
    "TimeoutError",
    "TryAgainError",
    "UnkillableError",
    "WrongTypeError",
    "__impl__",
    "parse_url",
]
