"""The pure-Python core: the same API and the same bytes as the Cython ``_core``.

It needs no compiler and no hiredis: the reply reader is a RESP2 parser written here.
Select it with ``FASTLOCK_IMPL=python`` (or ``Client(impl="python")``).
"""

from __future__ import annotations

import builtins
import socket
from collections.abc import Iterable, Sequence
from math import isfinite
from time import monotonic
from typing import Any

from ._arguments import (
    MAX_BULK_LENGTH,
    NOT_CONTIGUOUS,
    NOT_FINITE,
    NOT_UTF8,
    argument_type_error,
    argument_value_error,
    too_long,
)
from .exceptions import (
    OUT_OF_STEP,
    ConnectionError,
    ProtocolError,
    ResponseError,
    TimeoutError,
    response_error,
)

__all__ = ["Connection", "ReplyReader", "encode_command", "encode_evalsha", "encode_pipeline"]

_READ_SIZE = 65536
_TIMEOUTS = (builtins.TimeoutError, BlockingIOError)


def _arg(value: Any, kind: int, index: int, command: int) -> bytes:
    """Normalise one argument to the bytes sent (the rules in README)."""
    t = type(value)
    data: bytes
    if t is bytes:
        data = value
    elif isinstance(value, str):
        try:
            data = value.encode()
        except UnicodeEncodeError:
            raise argument_value_error(kind, index, command, NOT_UTF8) from None
    elif value is True:
        return b"1"
    elif value is False or value is None:
        return b"0"
    elif isinstance(value, int):
        return b"%d" % value
    elif isinstance(value, float):
        if not isfinite(value):
            raise argument_value_error(kind, index, command, NOT_FINITE)
        return float.__repr__(value).encode()
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, memoryview):
        if not value.c_contiguous:
            raise argument_value_error(kind, index, command, NOT_CONTIGUOUS)
        data = value.tobytes()
    else:
        raise argument_type_error(kind, index, command, value)
    if len(data) > MAX_BULK_LENGTH:
        raise argument_value_error(kind, index, command, too_long(len(data)))
    return data


def _put_command(out: list[bytes], args: tuple[Any, ...], command: int) -> None:
    if not args:
        raise ValueError("a command needs at least its name")
    out.append(b"*%d\r\n" % len(args))
    for i, value in enumerate(args):
        data = _arg(value, 0, i, command)
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))


def _put_evalsha(out: list[bytes], sha: Any, keys: Iterable[Any], args: Iterable[Any]) -> None:
    keys = keys if type(keys) in (tuple, list) else tuple(keys)
    args = args if type(args) in (tuple, list) else tuple(args)
    sha_bytes = _arg(sha, 0, 1, -1)
    numkeys = b"%d" % len(keys)  # type: ignore[arg-type]
    out.append(
        b"*%d\r\n$7\r\nEVALSHA\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
        % (3 + len(keys) + len(args), len(sha_bytes), sha_bytes, len(numkeys), numkeys)  # type: ignore[arg-type]
    )
    for kind, values in ((1, keys), (2, args)):
        for i, value in enumerate(values):
            data = _arg(value, kind, i, -1)
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))


def _put_pipeline(out: list[bytes], commands: Iterable[tuple[Any, ...]]) -> None:
    for i, command in enumerate(commands):
        if not isinstance(command, tuple):
            raise TypeError(f"Expected tuple, got {type(command).__name__}")
        _put_command(out, command, i)


def encode_command(*args: Any) -> bytes:
    """Encode one command as a RESP array of bulk strings."""
    out: list[bytes] = []
    _put_command(out, args, -1)
    return b"".join(out)


def encode_evalsha(sha: Any, keys: Iterable[Any], args: Iterable[Any]) -> bytes:
    """Encode ``EVALSHA sha len(keys) *keys *args``."""
    out: list[bytes] = []
    _put_evalsha(out, sha, keys, args)
    return b"".join(out)


def encode_pipeline(commands: Iterable[tuple[Any, ...]]) -> bytes:
    """Encode several commands back to back, as one write."""
    out: list[bytes] = []
    _put_pipeline(out, commands)
    return b"".join(out)


class _NotEnough(Exception):
    """Raised inside the parser when the buffer ends mid-reply."""


class ReplyReader:
    """A RESP2 reply parser; error replies come back as typed ``ResponseError`` values."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: Any, offset: int = 0, length: int = -1) -> None:
        """Add received bytes (any buffer; ``offset``/``length`` select a slice)."""
        view = memoryview(data).cast("B")
        self._buf += view[offset:] if length < 0 else view[offset : offset + length]

    def has_data(self) -> bool:
        """True when bytes not yet returned as a reply are buffered."""
        return len(self._buf) > self._pos

    def gets(self) -> Any:
        """Return the next complete reply, or ``False`` when more bytes are needed."""
        try:
            reply = self._parse()
        except _NotEnough:
            self._pos = 0
            return False
        del self._buf[: self._pos]
        self._pos = 0
        return reply

    def _line(self) -> bytes:
        end = self._buf.find(b"\r\n", self._pos)
        if end < 0:
            raise _NotEnough
        line = bytes(self._buf[self._pos : end])
        self._pos = end + 2
        return line

    def _int(self, text: bytes) -> int:
        if not text or not (text.isdigit() or (text[:1] == b"-" and text[1:].isdigit())):
            raise ProtocolError(f"Bad integer value {text!r}")
        return int(text)

    def _parse(self) -> Any:
        if self._pos >= len(self._buf):
            raise _NotEnough
        kind = self._buf[self._pos]
        self._pos += 1
        line = self._line()
        if kind == 43:  # +
            return line
        if kind == 45:  # -
            return response_error(line.decode("utf-8", "replace"))
        if kind == 58:  # :
            return self._int(line)
        if kind == 36:  # $
            size = self._int(line)
            if size < 0:
                return None
            end = self._pos + size
            if len(self._buf) < end + 2:
                raise _NotEnough
            data = bytes(self._buf[self._pos : end])
            self._pos = end + 2
            return data
        if kind == 42:  # *
            count = self._int(line)
            return None if count < 0 else [self._parse() for _ in range(count)]
        raise ProtocolError(f"Protocol error, got {chr(kind)!r} as reply type byte")


class Connection:
    """One socket to one server, driven through the socket's Python methods.

    Plain sockets are blocking with SO_SNDTIMEO/SO_RCVTIMEO timeouts (so one ``send``
    and one ``recv`` syscall per command); TLS sockets use their own timeout. Bytes left
    in the reader after a command's reply(ies) close the connection: ``ProtocolError``.
    ``round_trips`` counts the writes sent (a pipeline is one).
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.broken = False
        self.last_used = 0.0  # time.monotonic() of the last reply read
        self.generation = 0
        self.round_trips = 0
        self._reader = ReplyReader()
        self._in = bytearray(_READ_SIZE)

    def close(self) -> None:
        """Close the socket; the connection cannot be used again."""
        self.broken = True
        self.sock.close()

    def _usable(self) -> None:
        if self.broken:
            raise ConnectionError("connection is closed", sent=False)

    def _lost(self, exc: OSError, what: str, sent: bool) -> ConnectionError:
        self.close()
        cls = TimeoutError if isinstance(exc, _TIMEOUTS) else ConnectionError
        return cls(f"{what}: {exc}", sent=sent)

    def _flush(self, payload: bytes) -> None:
        self.round_trips += 1
        view = memoryview(payload)
        total = 0
        try:
            while total < len(view):
                total += self.sock.send(view[total:])
        except OSError as exc:
            raise self._lost(exc, "send failed", total > 0) from None

    def _read_reply(self) -> Any:
        reader = self._reader
        try:
            reply = reader.gets()
            while reply is False:
                try:
                    n = self.sock.recv_into(self._in)
                except OSError as exc:
                    raise self._lost(exc, "receive failed", True) from None
                if n == 0:
                    self.close()
                    raise ConnectionError("connection closed by the server", sent=True)
                reader.feed(self._in, 0, n)
                reply = reader.gets()
        except ProtocolError:
            self.close()
            raise
        self.last_used = monotonic()
        return reply

    def _check_drained(self) -> None:
        """Raise if anything follows the last reply read: the stream is out of step."""
        if self._reader.has_data():
            self.close()
            raise ProtocolError(OUT_OF_STEP)

    def _roundtrip(self, payload: bytes) -> Any:
        self._flush(payload)
        reply = self._read_reply()
        self._check_drained()
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    def execute(self, args: tuple[Any, ...]) -> Any:
        """Send one command and return its reply; an error reply is raised."""
        self._usable()
        out: list[bytes] = []
        _put_command(out, args, -1)
        return self._roundtrip(b"".join(out))

    def evalsha(self, sha: Any, keys: Iterable[Any], args: Iterable[Any]) -> Any:
        """Run ``EVALSHA sha len(keys) *keys *args``; an error reply is raised."""
        self._usable()
        out: list[bytes] = []
        _put_evalsha(out, sha, keys, args)
        return self._roundtrip(b"".join(out))

    def pipeline(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send commands in one write, read all replies; error replies are returned."""
        count = len(commands)
        self._usable()
        out: list[bytes] = []
        _put_pipeline(out, commands)
        self._flush(b"".join(out))
        replies = [self._read_reply() for _ in range(count)]
        self._check_drained()
        return replies
