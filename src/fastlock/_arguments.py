"""Argument rules shared by both cores: limits, and the exact error each core raises.

Both the Cython core and the pure-Python core build their argument errors here, so
the two cannot drift apart in wording.
"""

from __future__ import annotations

from .exceptions import ArgumentError, ArgumentTypeError

_ARGUMENT_KINDS = ("argument", "keys", "args")
MAX_BULK_LENGTH = 512 * 1024 * 1024
"""Largest argument Redis accepts by default (``proto-max-bulk-len``)."""


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
