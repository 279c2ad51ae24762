"""The fastlock exception tree: one root, builtin mix-ins, server error codes as classes.

Server error replies are classified by their *code word* (the first token of the
error text, e.g. ``NOSCRIPT``), through a registry that refuses duplicate codes. An
error raised from inside a Lua script carries the Redis 7 suffix
`` script: <sha>, on @user_script:<line>.`` (or the Redis 6 ``Error running script``
wording) and becomes a :class:`ScriptError` whatever its first word is, so a script
that raises ``"NOSCRIPT ..."`` or ``"BUSY ..."`` is never mistaken for the server
saying so.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from typing import ClassVar, TypeVar

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AskError",
    "AuthenticationError",
    "BusyError",
    "ClusterDownError",
    "ConnectionError",
    "CrossSlotError",
    "ExecAbortError",
    "FastlockError",
    "LoadingError",
    "MovedError",
    "NoPermissionError",
    "NoScriptError",
    "NotBusyError",
    "OutOfMemoryError",
    "PoolTimeoutError",
    "ProtocolError",
    "ReadOnlyError",
    "ResponseError",
    "ScriptError",
    "TimeoutError",
    "TryAgainError",
    "UnkillableError",
    "WrongTypeError",
    "response_error",
]


class FastlockError(Exception):
    """Root of every exception fastlock raises."""


# --- client-side argument errors ------------------------------------------------------


class ArgumentError(FastlockError, ValueError):
    """An argument has a supported type but a value Redis cannot take (NaN, lone
    surrogate, over the bulk-length limit)."""


class ArgumentTypeError(FastlockError, TypeError):
    """An argument has a type fastlock does not send (the message names its position)."""


# --- transport errors -----------------------------------------------------------------


class ConnectionError(FastlockError, builtins.ConnectionError):
    """The connection failed or was lost; it has been discarded.

    ``sent`` tells whether any byte of the failed command left the client. When it is
    ``True`` the server may have executed the command; fastlock never resends it.
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class TimeoutError(ConnectionError, builtins.TimeoutError):
    """Connecting, sending or waiting for a reply took longer than its timeout."""


class PoolTimeoutError(FastlockError, builtins.TimeoutError):
    """No connection became free in the pool before the checkout timeout."""


class ProtocolError(FastlockError):
    """The server sent bytes that are not RESP; the connection is unusable."""


# --- server error replies -------------------------------------------------------------

# Redis 7: " script: <sha>, on @user_script:<line>."; Valkey 8+: " script: on @user_script:<line>."
_SCRIPT_SUFFIX = re.compile(
    r" script: (?:(?P<sha>[^,\s]+), )?on @(?:user_script|user_function):(?P<line>\d+)\.$"
)
_SCRIPT_V6 = re.compile(r"^ERR Error (?:running|compiling) script \(")


class ResponseError(FastlockError):
    """The server answered with an error reply.

    ``code`` is the reply's code word (``ERR``, ``WRONGTYPE``, ...) or ``""`` when the
    reply has none; ``message`` is the rest of the text; ``str(err)`` the full text.
    """

    code_word: ClassVar[str] = ""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        code, _, message = text.partition(" ")
        if code and code.isupper() and code.isalpha():
            self.code, self.message = code, message
        else:
            self.code, self.message = "", text

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (response_error, (self.text,))


class ScriptError(ResponseError):
    """An error raised while a Lua script ran (by the script or by a command it called).

    ``sha`` and ``line`` (in the *rendered* script) are parsed from the reply when the
    server gives them; the script layer maps them back to the source file.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        match = _SCRIPT_SUFFIX.search(text)
        self.sha: str | None = match["sha"] if match else None
        self.line: int | None = int(match["line"]) if match else None


_REGISTRY: dict[str, type[ResponseError]] = {}


_R = TypeVar("_R", bound="type[ResponseError]")


def _code(word: str) -> Callable[[_R], _R]:
    def register(cls: _R) -> _R:
        if word in _REGISTRY:
            raise RuntimeError(f"error code {word} registered twice")
        cls.code_word = word
        _REGISTRY[word] = cls
        return cls

    return register


@_code("NOSCRIPT")
class NoScriptError(ResponseError):
    """The server does not hold a script with that SHA1 (restart, flush, failover)."""


@_code("BUSY")
class BusyError(ResponseError):
    """Another script has run past ``busy-reply-threshold``; retry later."""


@_code("UNKILLABLE")
class UnkillableError(ResponseError):
    """SCRIPT KILL refused: the running script has already written."""


@_code("NOTBUSY")
class NotBusyError(ResponseError):
    """SCRIPT KILL found no script running."""


@_code("WRONGTYPE")
class WrongTypeError(ResponseError):
    """A command met a key holding another type."""


class _RedirectError(ResponseError):
    """Cluster redirection: ``slot``, ``host`` and ``port`` of the node to ask."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        slot, _, address = self.message.partition(" ")
        host, _, port = address.rpartition(":")
        self.slot = int(slot) if slot.isdigit() else -1
        self.host = host
        self.port = int(port) if port.isdigit() else 0


@_code("MOVED")
class MovedError(_RedirectError):
    """The key's slot is served by another cluster node."""


@_code("ASK")
class AskError(_RedirectError):
    """The key's slot is migrating; ask the named node once."""


@_code("READONLY")
class ReadOnlyError(ResponseError):
    """A write reached a replica (often right after a failover)."""


@_code("LOADING")
class LoadingError(ResponseError):
    """The server is loading its dataset."""


@_code("OOM")
class OutOfMemoryError(ResponseError):
    """The write was refused because maxmemory is reached."""


@_code("NOPERM")
class NoPermissionError(ResponseError):
    """The ACL user may not run this command or touch this key."""


@_code("WRONGPASS")
class AuthenticationError(ResponseError):
    """AUTH was refused."""


_REGISTRY["NOAUTH"] = AuthenticationError


@_code("CROSSSLOT")
class CrossSlotError(ResponseError):
    """The keys of one command hash to different cluster slots."""


@_code("TRYAGAIN")
class TryAgainError(ResponseError):
    """A multi-key command met a slot being resharded."""


@_code("CLUSTERDOWN")
class ClusterDownError(ResponseError):
    """The cluster cannot serve the slot."""


@_code("EXECABORT")
class ExecAbortError(ResponseError):
    """EXEC discarded the transaction because a queued command was refused."""


def response_error(text: str | bytes) -> ResponseError:
    """Build the typed exception for one server error reply (returned, not raised)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if _SCRIPT_SUFFIX.search(text) or _SCRIPT_V6.match(text):
        return ScriptError(text)
    cls = _REGISTRY.get(text.partition(" ")[0], ResponseError)
    return cls(text)
