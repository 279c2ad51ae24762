"""The fastlock exception tree: one root, builtin mix-ins, server error codes as classes.

Server error replies are classified by their *code word* (the first token of the
error text, e.g. ``NOSCRIPT``), through a registry that refuses duplicate codes
(:data:`CODES`; :mod:`fastlock.protocol.replies` reads the replies). An
error raised while a Lua script ran carries the Redis 7 suffix
`` script: <sha>, on @user_script:<line>.`` (or the Redis 6 ``Error running script``
wording) and becomes a :class:`LuaError` whatever its first word is, so a script that
raises ``"NOSCRIPT ..."`` or ``"BUSY ..."`` is never mistaken for the server saying so.
A command the script called that the server refused for a condition with a class of
its own (``READONLY``, ``OOM``, ``WRONGTYPE``) raises a class that is both: e.g.
:class:`LuaReadOnlyError` is a :class:`ReadOnlyError` and a :class:`LuaCommandError`.
``NOSCRIPT`` and ``BUSY`` are recognised only in the server's own wording (Redis and
Valkey); a script cannot *return* them either (see :mod:`fastlock.scripts.registry`).

The script layer adds the script name, the original file and line and context to a
:class:`LuaError`, and raises :class:`ScriptBusyError`; template problems are
:class:`TemplateError`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AskError",
    "AuthenticationError",
    "BusyError",
    "ClusterDownError",
    "ConnectionError",
    "CrossSlotError",
    "DuplicateJob",
    "ExecAbortError",
    "FastlockError",
    "LeaseLost",
    "LoadingError",
    "LockConflictError",
    "LockError",
    "LockNotOwnedError",
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
    "PoolTimeoutError",
    "ProtocolError",
    "QueueError",
    "ReadOnlyError",
    "ResponseError",
    "ScriptBusyError",
    "ScriptError",
    "ScriptNotFoundError",
    "ScriptNotRunError",
    "TemplateError",
    "TimeoutError",
    "TryAgainError",
    "UnkillableError",
    "UnknownOptionError",
    "UsageError",
    "WrongTypeError",
]


class FastlockError(Exception):
    """Root of every exception fastlock raises."""


# --- client-side argument errors ------------------------------------------------------


class ArgumentError(FastlockError, ValueError):
    """An argument has a supported type but a value Redis cannot take (NaN, lone
    surrogate, over the bulk-length limit)."""


class ArgumentTypeError(FastlockError, TypeError):
    """An argument has a type fastlock does not send (the message names its position)."""


class UnknownOptionError(ArgumentError, TypeError):
    """A keyword option the call does not take (a misspelt ``ttll=5``); the message names it
    and the valid ones. Also a ``TypeError``, what Python raises for an unexpected keyword."""


class UsageError(FastlockError, builtins.RuntimeError):
    """An object was used in a state that does not allow it (a reaper started twice)."""


# --- transport errors -----------------------------------------------------------------


class ConnectionError(FastlockError, builtins.ConnectionError):
    """The connection failed or was lost; it has been discarded.

    ``sent`` tells whether any byte of the failed command left the client. When it is
    ``True`` the server may have executed the command; fastlock sends it again only if it
    is idempotent (docs/delivery.md lists each case).
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class TimeoutError(ConnectionError, builtins.TimeoutError):
    """Connecting, sending or waiting for a reply took longer than its timeout."""


class PoolTimeoutError(FastlockError, builtins.TimeoutError):
    """No connection became free in the pool before the checkout timeout."""


class ProtocolError(FastlockError):
    """The server's reply is not what the protocol or the script promises: bytes that are not
    RESP or bytes after a command's reply (the connection is then closed, never reused), or a
    script reply of the wrong shape."""


OUT_OF_STEP = (
    "unexpected data after the reply (an unsolicited reply or a RESP3 push): the connection "
    "is out of step and was closed; the command was sent and may have run"
)
"""The ``ProtocolError`` text when bytes follow a command's reply (both cores)."""


# --- server error replies -------------------------------------------------------------


class ResponseError(FastlockError):
    """The server answered with an error reply.

    ``code`` is the reply's code word (``ERR``, ``WRONGTYPE``, ...) or ``""`` when the
    reply has none; ``message`` is the rest of the text; ``str(err)`` the full text.
    """

    code_word: ClassVar[str] = ""
    in_script: ClassVar[type[LuaCommandError] | None] = None
    """The class of this error when a command called by a script meets it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        code, _, message = text.partition(" ")
        if code and code.isupper() and code.isalpha():
            self.code, self.message = code, message
        else:
            self.code, self.message = "", text

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.text,))


class ScriptError(ResponseError):
    """An error raised while a Lua script ran (by the script or by a command it called);
    every one fastlock reads is a :class:`LuaError`."""


_REGISTRY: dict[str, type[ResponseError]] = {}
CODES: Mapping[str, type[ResponseError]] = MappingProxyType(_REGISTRY)
"""The class of each server error code word (filled by the classes below);
:func:`fastlock.protocol.replies.response_error` reads it."""


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


def _number(text: str, highest: int) -> int:
    """``text`` as a number from 0 to ``highest`` written in ASCII digits, else -1."""
    if text.isascii() and text.isdigit() and len(text) <= len(str(highest)) and int(text) <= highest:
        return int(text)
    return -1


class _RedirectError(ResponseError):
    """Cluster redirection: ``slot``, ``host`` and ``port`` of the node to ask. A text that
    is not ``<slot> <host>:<port>`` (ASCII digits, slot below 16384, port below 65536) gives
    slot -1 and port 0."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        slot, _, address = self.message.partition(" ")
        host, _, port = address.rpartition(":")
        self.slot = _number(slot, 16383)
        self.host = host
        self.port = max(_number(port, 65535), 0)


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


# --- the script layer -----------------------------------------------------------------


def _reduce_with_fields(self: ResponseError) -> tuple[object, ...]:
    """Pickle support for errors that carry fields beyond their text."""
    return (type(self), (self.text,), self.__dict__)


class ScriptBusyError(BusyError):
    """The server stayed busy running another script until the call's deadline.

    ``script`` names the script fastlock tried to run and ``waited`` the seconds spent
    retrying; ``text`` is the server's last BUSY reply.
    """

    def __init__(self, text: str, *, script: str = "", waited: float = 0.0) -> None:
        super().__init__(text)
        self.script = script
        self.waited = waited

    __reduce__ = _reduce_with_fields

    def __str__(self) -> str:
        return f"script {self.script}: server still busy after {self.waited:.3f} s: {self.text}"


class ScriptNotRunError(ResponseError):
    """A pipelined script call the server did not run (``text`` is its reply: ``NOSCRIPT``,
    the script was flushed since fastlock saw it loaded, or ``BUSY``) and that fastlock did
    not send again, because commands queued after it ran: sending it now would run it out of
    order. ``script`` names the script, ``index`` is the call's position in the pipeline.
    Send it again, or let the pipeline do so after the rest: ``execute(allow_reorder=True)``.
    """

    def __init__(self, text: str, *, script: str = "", index: int = -1) -> None:
        super().__init__(text)
        self.script = script
        self.index = index

    __reduce__ = _reduce_with_fields

    def __str__(self) -> str:
        return (
            f"pipeline call {self.index} of script {self.script} did not run ({self.text}) and was not "
            "sent again: commands queued after it ran, so it would run out of order; send it again, "
            "or execute(allow_reorder=True) to run such calls after the rest"
        )


class LuaError(ScriptError):
    """A fastlock script failed; ``str(err)`` is a readable report with source context.

    ``script`` is the script name and ``sha`` its SHA1; ``file`` and ``line`` the position
    in the original source file (through the source map, so an error inside a partial
    points into the partial); ``rendered_line`` the line the server reported; ``code`` and
    ``message`` the error without position noise; ``context`` the lines around the failing
    one (failing line marked ``=>``). ``file``/``line`` are ``None`` when the server gave
    no position (an error *returned* with ``redis.error_reply``). ``text`` is the raw reply.
    Read from a plain ``EVAL``/``EVALSHA`` (no script layer), only ``code``, ``message``
    and ``rendered_line`` are known and ``str(err)`` is the raw reply.
    """

    kind: ClassVar[str] = "failed"

    def __init__(
        self,
        text: str,
        *,
        script: str = "",
        sha: str | None = None,
        file: str | None = None,
        line: int | None = None,
        rendered_line: int | None = None,
        code: str = "",
        message: str = "",
        context: str = "",
    ) -> None:
        super().__init__(text)
        self.script = script
        self.sha = sha
        self.file = file
        self.line = line
        self.rendered_line = rendered_line
        self.code = code
        self.message = message
        self.context = context

    __reduce__ = _reduce_with_fields

    def __str__(self) -> str:
        if not self.script:
            return self.text
        where = f" at {self.file}:{self.line}" if self.file is not None else ""
        head = f"{self.code} {self.message}" if self.code else self.message
        report = f"script {self.script} {self.kind}{where}: {head}"
        return f"{report}\n{self.context}" if self.context else report


class LuaRaisedError(LuaError):
    """The script failed by itself: ``error()``, a Lua runtime error, or an error value
    returned with ``redis.error_reply`` (those carry no position)."""

    kind = "raised an error"


class LuaCommandError(LuaError):
    """The server refused a command the script called (``code`` keeps the server's code,
    e.g. ``WRONGTYPE``, on Redis 7+ and Valkey; Redis 6 rewrites it to ``ERR`` but
    fastlock recovers it from the message)."""

    kind = "had a command refused"


class LuaCompileError(LuaError):
    """The rendered script does not compile (reported by ``SCRIPT LOAD``)."""

    kind = "does not compile"


_L = TypeVar("_L", bound="type[LuaCommandError]")


def _in_script(server: type[ResponseError]) -> Callable[[_L], _L]:
    """Register the decorated class (a :class:`LuaCommandError` and a ``server``) as the
    class of ``server``'s code met by a command a script called."""

    def register(cls: _L) -> _L:
        if not issubclass(cls, server) or _REGISTRY.get(server.code_word) is not server or server.in_script:
            raise RuntimeError(f"{cls.__name__}: not a subclass of {server.__name__}, or registered twice")
        server.in_script = cls
        return cls

    return register


@_in_script(WrongTypeError)
class LuaWrongTypeError(LuaCommandError, WrongTypeError):
    """A command the script called met a key holding another type."""


@_in_script(ReadOnlyError)
class LuaReadOnlyError(LuaCommandError, ReadOnlyError):
    """A write the script made reached a replica: a :class:`ReadOnlyError` with the
    script's position."""


@_in_script(OutOfMemoryError)
class LuaOutOfMemoryError(LuaCommandError, OutOfMemoryError):
    """A write the script made was refused at maxmemory: an :class:`OutOfMemoryError`
    with the script's position (the writes before it stay done)."""


class ScriptNotFoundError(FastlockError, LookupError):
    """No script of that name in the registry's folders or registered sources."""


class TemplateError(FastlockError, ValueError):
    """A script template cannot be rendered: missing partial, include cycle, bad directive."""


# --- locks ----------------------------------------------------------------------------


class LockError(FastlockError, ValueError):
    """A lock could not be used as asked (bad options, missing strategy hook, ...)."""


class LockNotOwnedError(LockError):
    """The job does not hold the lock (it expired, was released or was deleted)."""


class LockConflictError(LockError):
    """The lock is held by other jobs; ``conflict`` (a :class:`fastlock.locks.conflict.Conflict`,
    when a strategy raised it) tells which."""

    def __init__(self, message: object, conflict: object = None) -> None:
        super().__init__(str(message))
        self.conflict = conflict


# --- job queues -----------------------------------------------------------------------


class QueueError(FastlockError):
    """A job queue refused an operation."""


class LeaseLost(QueueError):
    """The lease of ``jobs`` is no longer theirs: it expired and was recovered or claimed
    again (a newer fencing token holds the job), or the job was dead-lettered."""

    def __init__(self, jobs: list[Any]) -> None:
        ids = ", ".join(str(job.id) for job in jobs[:5]) + (", ..." if len(jobs) > 5 else "")
        super().__init__(f"lease lost for {len(jobs)} job(s): {ids}")
        self.jobs = jobs


class JobCancelled(QueueError):
    """Job ``job_id`` was cancelled while it ran (:meth:`Queue.cancel <fastlock.Queue.cancel>`):
    raised by ``job.raise_if_cancelled()`` for its handler to stop; the worker ends the job as
    cancelled (neither retried nor dead-lettered)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id} was cancelled")
        self.job_id = job_id


class DuplicateJob(QueueError):
    """An enqueue was refused: its job id exists or its unique lock is held by ``job_id``."""

    def __init__(self, job_id: str | None) -> None:
        super().__init__(f"duplicate of job {job_id}")
        self.job_id = job_id
