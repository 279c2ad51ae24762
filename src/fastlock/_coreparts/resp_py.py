"""The RESP protocol in pure Python, sans I/O: the encoders (the same bytes as the Cython
``_coreparts/resp_writer.pxi``) and an incremental reply reader that needs no hiredis yet returns
what hiredis returns and raises what it raises. Nothing here touches a socket or a clock.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable
from typing import Any, final

from ..exceptions import ArgumentError, ArgumentTypeError, ProtocolError
from ..protocol.arguments import (
    BAD_MAP_KEY,
    MAX_BULK_LENGTH,
    MAX_REPLY_ELEMENTS,
    NOT_CONTIGUOUS,
    NOT_FINITE,
    NOT_UTF8,
    argument_type_error,
    argument_value_error,
    feed_range_error,
    reply_too_long,
    too_long,
)
from ..protocol.replies import response_error

try:
    from hiredis import PushNotification
except ImportError:  # no hiredis 3.2+ (a dependency): pushes are still a list type of their own

    class PushNotification(list):  # type: ignore[no-redef,type-arg]
        """A RESP3 push reply (hiredis's type, when hiredis is installed)."""


__all__ = [
    "NOT_ENOUGH",
    "ReplyReader",
    "encode_command",
    "encode_evalsha",
    "encode_pipeline",
    "evalsha_head",
    "put_command",
    "put_evalsha",
    "put_pipeline",
]


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
        if not math.isfinite(value):
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


_HEADS = [b"$%d\r\n" % n for n in range(128)]
"""The bulk headers of the usual argument lengths, formatted once."""


def _put_bulks(out: list[bytes], values: Iterable[Any], kind: int, command: int) -> None:
    """Each of ``values`` as a bulk string (``kind`` and ``command`` for the errors)."""
    for i, value in enumerate(values):
        data = _arg(value, kind, i, command)
        n = len(data)
        out += (_HEADS[n] if n < 128 else b"$%d\r\n" % n, data, b"\r\n")


def put_command(out: list[bytes], args: tuple[Any, ...], command: int) -> None:
    if not args:
        raise ArgumentError("a command needs at least its name")
    out.append(b"*%d\r\n" % len(args))
    _put_bulks(out, args, 0, command)


def evalsha_head(sha: Any, command: int = -1) -> bytes:
    """The static part of a script's EVALSHA: the command name and ``sha``, encoded."""
    data = _arg(sha, 0, 1, command)
    return b"$7\r\nEVALSHA\r\n$%d\r\n%s\r\n" % (len(data), data)


def put_evalsha(
    out: list[bytes],
    sha: Any,
    keys: Iterable[Any],
    args: Iterable[Any],
    head: bytes | None = None,
    command: int = -1,
) -> None:
    """``EVALSHA sha len(keys) *keys *args`` (``head``: :func:`evalsha_head`, when known);
    ``command`` is the call's index in a pipeline (for the errors), or -1."""
    keys = keys if type(keys) in (tuple, list) else tuple(keys)
    args = args if type(args) in (tuple, list) else tuple(args)
    if head is None:
        head = evalsha_head(sha, command)
    numkeys = b"%d" % len(keys)  # type: ignore[arg-type]
    out.append(
        b"*%d\r\n%s$%d\r\n%s\r\n" % (3 + len(keys) + len(args), head, len(numkeys), numkeys)  # type: ignore[arg-type]
    )
    _put_bulks(out, keys, 1, command)
    _put_bulks(out, args, 2, command)


def put_pipeline(out: list[bytes], commands: Iterable[tuple[Any, ...]]) -> None:
    for i, command in enumerate(commands):
        if not isinstance(command, tuple):
            raise ArgumentTypeError(f"Expected tuple, got {type(command).__name__}")
        put_command(out, command, i)


def encode_command(*args: Any) -> bytes:
    """Encode one command as a RESP array of bulk strings."""
    out: list[bytes] = []
    put_command(out, args, -1)
    return b"".join(out)


def encode_evalsha(sha: Any, keys: Iterable[Any], args: Iterable[Any]) -> bytes:
    """Encode ``EVALSHA sha len(keys) *keys *args``."""
    out: list[bytes] = []
    put_evalsha(out, sha, keys, args)
    return b"".join(out)


def encode_pipeline(commands: Iterable[tuple[Any, ...]]) -> bytes:
    """Encode several commands back to back, as one write."""
    out: list[bytes] = []
    put_pipeline(out, commands)
    return b"".join(out)


# --- the reply reader -----------------------------------------------------------------
# Same values and same errors as hiredis's reader (the Cython core), RESP3 included:
# ``%`` maps are dicts filled the way hiredis fills them, ``~`` sets and ``|`` attributes
# (2n items) are lists, ``>`` pushes are ``hiredis.PushNotification`` (a list), ``(`` big
# numbers and ``=`` verbatim strings are bytes; ``!`` is not a type hiredis knows.

_LINE_TYPES = frozenset(b"+-:,_#(")
_BULK_TYPES = frozenset(b"$=")
_AGGREGATE_TYPES = frozenset(b"*%~>|")
_TYPES = _LINE_TYPES | _BULK_TYPES | _AGGREGATE_TYPES
_INTEGER = re.compile(rb"0|-?[1-9][0-9]{0,18}")
_DOUBLE = re.compile(rb"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ZERO = re.compile(rb"-?[0.]*(?:[eE].*)?")
_DOUBLE_WORDS = {b"inf": "inf", b"-inf": "-inf", b"nan": "nan", b"-nan": "nan"}  # a new float each
_BIGNUM = re.compile(rb"-?[0-9]*")
_ESCAPES = {0x5C: "\\\\", 0x22: '\\"', 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x07: "\\a", 0x08: "\\b"}
_MAX_ELEMENTS = 2**32 - 1  # hiredis's own aggregate limit
_MAX_DEPTH = 1024  # hiredis's REDIS_READER_MAX_REPLY_DEPTH
_BAD_VERBATIM = "Verbatim string 4 bytes of content type are missing or incorrectly encoded."
NOT_ENOUGH: Any = object()
"""What :meth:`ReplyReader.gets` returns while a reply is incomplete."""


def _ssize(value: Any) -> int:
    """``value`` as a C ``Py_ssize_t`` argument: the Cython core's (and hiredis's) errors."""
    number: int = operator.index(value)
    if not -(2**63) <= number < 2**63:
        raise OverflowError("Python int too large to convert to C ssize_t")
    return number


def _integer(text: bytes) -> int | None:
    """The value of a strict 64-bit decimal (no sign but ``-``, no leading zero), or None."""
    if _INTEGER.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _double(text: bytes) -> float:
    if len(text) >= 326:
        raise ProtocolError("Double value is too large")
    word = _DOUBLE_WORDS.get(text.lower())
    if word is not None:
        return float(word)
    if _DOUBLE.fullmatch(text) is not None:
        value = float(text)
        # like hiredis: no overflow to infinity, no underflow of a non-zero value to 0
        if math.isfinite(value) and (value or _ZERO.fullmatch(text) is not None):
            return value
    raise ProtocolError("Bad double value")


def _line_value(kind: int, line: bytes) -> Any:
    """The value of a one-line reply of type ``kind`` (``+ - : , _ # (``)."""
    if kind == 43 or kind == 45:  # + -
        if b"\r" in line or b"\n" in line:
            raise ProtocolError("Bad simple string value")
        return line if kind == 43 else response_error(line.decode("utf-8", "replace"))
    if kind == 58:  # :
        if line.isdigit() and len(line) < 19 and (line[0] != 48 or len(line) == 1):  # the usual case
            return int(line)
        value = _integer(line)
        if value is None:
            raise ProtocolError("Bad integer value")
        return value
    if kind == 44:  # ,
        return _double(line)
    if kind == 95:  # _
        if line:
            raise ProtocolError("Bad nil value")
        return None
    if kind == 35:  # #  (hiredis's strchr also finds the NUL terminator: b"\0" is False)
        if len(line) != 1 or line not in b"tTfF\0":
            raise ProtocolError("Bad bool value")
        return line in b"tT"
    if _BIGNUM.fullmatch(line) is None:  # (
        raise ProtocolError("Bad bignum value")
    return line


def _length(kind: int, line: bytes, max_length: int, max_elements: int) -> int:
    """The length a bulk (``$ =``) or aggregate header declares; -1 is null."""
    bulk = kind in _BULK_TYPES
    if line.isdigit() and len(line) < 10 and (line[0] != 48 or len(line) == 1):  # the usual case
        value: int | None = int(line)
    else:
        value = _integer(line)
    if value is None:
        raise ProtocolError("Bad bulk string length" if bulk else "Bad multi-bulk length")
    if bulk and value > max_length:
        raise reply_too_long(f"bulk string length {value}", max_length)
    if not bulk and value > max_elements:
        raise reply_too_long(f"aggregate length {value}", max_elements)
    if value < -1 or value > _MAX_ELEMENTS:
        raise ProtocolError("Bulk string length out of range" if bulk else "Multi-bulk length out of range")
    return value


def _type_byte_error(kind: int) -> ProtocolError:
    text = _ESCAPES.get(kind) or (chr(kind) if 32 <= kind < 127 else f"\\x{kind:02x}")
    return ProtocolError(f'Protocol error, got "{text}" as reply type byte')


@final
class ReplyReader:
    """An incremental RESP2/RESP3 reply parser with hiredis's values and errors; error
    replies come back as typed ``ResponseError`` values.

    Parsing is iterative (open aggregates are a stack; like hiredis, at most 1024 deep) and
    each byte is parsed once: consumed bytes are dropped after every :meth:`gets`, the
    items of an unfinished aggregate are kept, and the search for the end of an unfinished
    line resumes where it stopped. A bulk string or line over ``max_length`` bytes, or an
    aggregate over ``max_elements``, raises ``ProtocolError`` at its header. After a
    ``ProtocolError`` the reader is spent: every later :meth:`gets` raises it again.
    """

    def __init__(self, max_length: int = MAX_BULK_LENGTH, max_elements: int = MAX_REPLY_ELEMENTS) -> None:
        self._buf = bytearray()
        self._searched = 0  # where the search for the pending line's end resumes
        self._stack: list[list[Any]] = []  # open aggregates: [container, items left, is a map]
        self._root: Any = None  # the outermost open aggregate
        self._error = ""  # the message of the ProtocolError that spent the reader
        self._max_length = max_length
        self._max_elements = max_elements

    def feed(self, data: Any, offset: int = 0, length: int = -1) -> None:
        """Add received bytes (any buffer; ``offset``/``length`` select a slice, ``length`` -1
        to the end): as hiredis, any other range than one inside the buffer is refused."""
        offset, length = _ssize(offset), _ssize(length)  # converted first, as C arguments are
        view = memoryview(data).cast("B")
        size = len(view)
        taken = length
        if taken == -1:
            taken = size - offset if 0 <= offset <= size else -1
        if offset < 0 or offset > size or taken < 0 or taken > size - offset:
            raise feed_range_error(offset, length, size)
        if not self._error:
            self._buf += view[offset : offset + taken]

    def _take(self, data: bytearray, n: int) -> None:
        """Feed the first ``n`` bytes of ``data`` (0 <= n <= its size): the connection's
        ``recv_into`` buffer, without ``feed``'s checks (the Cython reader's ``_take``)."""
        if not self._error:
            self._buf += memoryview(data)[:n]

    def has_data(self) -> bool:
        """Whether received bytes wait to be parsed (a partial or a further reply)."""
        return bool(self._buf) or bool(self._error)

    def gets(self) -> Any:
        """Return the next complete reply, or :data:`NOT_ENOUGH` when more bytes are needed."""
        if self._error:
            raise ProtocolError(self._error)
        if not self._buf:
            return NOT_ENOUGH
        try:
            return self._parse()
        except ProtocolError as exc:
            self._error = str(exc)
            self._buf = bytearray()
            self._stack.clear()
            self._root = None
            raise

    def _parse(self) -> Any:
        buf = self._buf
        size = len(buf)
        stack = self._stack
        pos = 0
        searched = self._searched
        self._searched = 0
        try:
            while pos < size:
                kind = buf[pos]
                if kind not in _TYPES:
                    raise _type_byte_error(kind)
                if len(stack) >= _MAX_DEPTH and kind in _AGGREGATE_TYPES:
                    raise ProtocolError("Max nesting depth exceeded")
                end = buf.find(b"\r\n", searched if searched > pos else pos + 1)
                if end < 0 or end - pos - 1 > self._max_length:
                    if end < 0 and size - pos - 1 < self._max_length + 2:
                        self._searched = max(size - 1 - pos, 1)
                        return NOT_ENOUGH
                    raise reply_too_long("line", self._max_length)
                line = bytes(buf[pos + 1 : end])
                after = end + 2
                items = 0
                if kind in _LINE_TYPES:
                    value = _line_value(kind, line)
                elif kind in _BULK_TYPES:
                    length = _length(kind, line, self._max_length, self._max_elements)
                    value = None
                    if length >= 0:
                        after += length + 2
                        if after > size:
                            return NOT_ENOUGH
                        value = bytes(buf[end + 2 : end + 2 + length])
                        if kind == 61:  # =
                            if length < 4 or value[3] != 58:
                                raise ProtocolError(_BAD_VERBATIM)
                            value = value[4:]
                else:
                    length = _length(kind, line, self._max_length, self._max_elements)
                    value = (
                        None if length < 0 else {} if kind == 37 else PushNotification() if kind == 62 else []
                    )
                    items = length * 2 if kind == 37 or kind == 124 else length  # % |
                pos = after
                if not stack:
                    self._root = value
                elif stack[-1][2]:
                    self._put_in_map(stack[-1], value)
                else:
                    frame = stack[-1]
                    frame[0].append(value)
                    frame[1] -= 1
                if items > 0:
                    stack.append([value, items, kind == 37])
                while stack and not stack[-1][1]:
                    stack.pop()
                if not stack:
                    reply, self._root = self._root, None
                    return reply
            return NOT_ENOUGH
        finally:
            del buf[:pos]

    @staticmethod
    def _put_in_map(frame: list[Any], value: Any) -> None:
        """Put a key or value into an open map as hiredis does: a key is stored with value
        None, and a value replaces the value of the last-inserted item."""
        container = frame[0]
        if frame[1] % 2 == 0:
            try:
                container[value] = None
            except TypeError:
                raise ProtocolError(BAD_MAP_KEY) from None
        else:
            container[container.popitem()[0]] = value
        frame[1] -= 1
