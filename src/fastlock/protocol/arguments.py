"""Argument and reply rules shared by both cores: limits, and the exact error each core raises.

Both the Cython core and the pure-Python core build their argument errors here, so
the two cannot drift apart in wording.
"""

from __future__ import annotations

from collections.abc import Collection

from ..exceptions import ArgumentError, ArgumentTypeError, ProtocolError, UnknownOptionError

_ARGUMENT_KINDS = ("argument", "keys", "args")
MAX_BULK_LENGTH = 512 * 1024 * 1024
"""Largest argument Redis accepts by default (``proto-max-bulk-len``), and the largest bulk
string or line a reply may carry: the readers refuse a longer one at its header."""


def _argument_label(kind: int, index: int, command: int) -> str:
    label = f"argument {index}" if kind == 0 else f"{_ARGUMENT_KINDS[kind]}[{index}]"
    return label if command < 0 else f"command {command} {label}"


def argument_type_error(kind: int, index: int, command: int, value: object) -> ArgumentTypeError:
    """The error both cores raise for an unsupported argument type.

    ``kind`` is 0 for a plain command argument, 1 for a script key, 2 for a script arg;
    ``command`` is the command's index in a pipeline, or -1.
    """
    return ArgumentTypeError(
        f"{_argument_label(kind, index, command)}: unsupported type {type(value).__qualname__!r}"
        " (expected bytes, bytearray, memoryview, str, int, float, bool or None)"
    )


def argument_value_error(kind: int, index: int, command: int, reason: str) -> ArgumentError:
    """The error both cores raise for an argument value Redis cannot take."""
    return ArgumentError(f"{_argument_label(kind, index, command)}: {reason}")


NOT_FINITE = "float is not finite (NaN and infinities cannot be sent)"
NOT_UTF8 = "str cannot be encoded as UTF-8 (lone surrogate)"
NOT_CONTIGUOUS = "memoryview is not C-contiguous"


def too_long(size: int) -> str:
    """Reason text for an argument over :data:`MAX_BULK_LENGTH`."""
    return f"{size} bytes is over the {MAX_BULK_LENGTH} byte limit of a Redis argument"


MAX_REPLY_ELEMENTS = 2**27
"""Most elements (or map pairs) a reply aggregate may declare. hiredis reserves 8 bytes per
declared element at the header, so one header can reserve at most 1 GiB."""


BAD_MAP_KEY = "Bad map key (an aggregate cannot be a key)"


def feed_range_error(offset: int, length: int, size: int) -> ArgumentError:
    """The error both readers raise when ``feed(data, offset, length)`` selects bytes outside
    ``data`` (``size`` bytes): a ``ValueError``, as hiredis raises."""
    return ArgumentError(
        f"feed(): offset {offset} and length {length} select no bytes of a {size}-byte buffer "
        "(give 0 <= offset <= offset + length <= its size; length -1 is to the end)"
    )


def reply_too_long(what: str, limit: int) -> ProtocolError:
    """The error both readers raise for a reply header or line over a limit."""
    return ProtocolError(f"Reply {what} is over the limit of {limit}")


MAX_DURATION = 1_000_000_000.0
"""Longest duration, in seconds (about 31.7 years), any fastlock call accepts: a ttl, lease,
delay, backoff or wait. Its milliseconds stay exact in Lua's doubles and in Redis's PEXPIRE."""


def duration_ms(seconds: object, name: str, *, minimum_ms: int = 1) -> int:
    """``seconds`` (a real number) as whole milliseconds for a script argument, rounded, and at
    least ``minimum_ms`` when positive. ``ArgumentTypeError`` for a non-number (bools included);
    ``ArgumentError`` (a ``ValueError``) for NaN, a negative or sub-minimum value, or one over
    :data:`MAX_DURATION`."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ArgumentTypeError(f"{name} must be a number of seconds, not {type(seconds).__qualname__!r}")
    if not 0 <= seconds <= MAX_DURATION:
        raise ArgumentError(f"{name} must be between 0 and {MAX_DURATION:.0f} seconds, not {seconds!r}")
    ms = round(seconds * 1000)
    if ms >= minimum_ms:
        return ms
    if seconds > 0 and minimum_ms == 1:
        return 1  # a positive sub-millisecond duration rounds up, never to "no expiry"
    raise ArgumentError(f"{name} must be at least {minimum_ms} ms, not {seconds!r}")


def unknown_options(given: Collection[str], valid: Collection[str], what: str = "lock") -> UnknownOptionError:
    """The error for keyword options ``given`` that are not in ``valid``: it names each (with
    the closest valid one when there is one) and the valid ones."""
    import difflib  # only on this error path

    named = []
    for option in sorted(given):
        close = difflib.get_close_matches(option, valid, n=1)
        named.append(f"{option!r} (did you mean {close[0]!r}?)" if close else repr(option))
    plural = "s" if len(named) > 1 else ""
    return UnknownOptionError(
        f"unknown {what} option{plural} {', '.join(named)}; the {what} options are {', '.join(sorted(valid))}"
    )
