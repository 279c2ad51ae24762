"""Lock digests: a stable name for "this job with these arguments".

``digest(name, queue, args)`` is the hex hash of the canonical JSON array ``[name, queue,
args]``: keys sorted, no whitespace (``separators=(",", ":")``), non-ASCII text kept as UTF-8
(``ensure_ascii=False``), NaN and infinities refused; tuples encode as arrays;
:class:`~datetime.date`, :class:`~datetime.datetime` and :class:`~datetime.time` encode as
their ``isoformat()`` text, :class:`~decimal.Decimal` and :class:`~uuid.UUID` as ``str()`` (so
a value and its text are one job: a framework that turns a datetime into text on its way to the
worker keeps the digest); any other type raises ``TypeError``. ``queue=None`` makes a digest
shared across queues. The hash is a :mod:`hashlib` name (``"sha256"``, the default;
``"sha3_256"`` and ``"blake2b"`` are FIPS-friendly, ``"md5"`` matches the length of
sidekiq-unique-jobs' legacy digests) or any callable from the canonical bytes to a lowercase hex
string. Changing the hash changes every digest: choose it once per deployment.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import date, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from ._impl import Core, default_core
from .exceptions import ArgumentError, ArgumentTypeError

__all__ = ["Digester", "HashFunction", "canonical", "check_digest", "encode_value"]

HashFunction = Callable[[bytes], str]

_HEX = re.compile(r"[0-9a-f]{8,128}")


def encode_value(value: object) -> str:
    """The text of a date, datetime, time, Decimal or UUID in the canonical form (JSON's
    ``default``); ``TypeError`` for any other type json cannot encode."""
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    raise ArgumentTypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=encode_value
)
# _ENCODER's C encoder built once, without the circular-reference check (markers=None): a
# cycle ends in RecursionError instead, and then _ENCODER runs again to report it as json does.
# Where CPython's private C encoder is missing or its signature differs, _ENCODER alone is used
# (the same bytes, slower).
try:
    from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]

    _ENCODE: Callable[[Any, int], list[str]] | None = c_make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", True, False, False
    )
except (ImportError, TypeError):
    _ENCODE = None

# The core's helpers (``_coreparts/domain_digest.pxi``; a namespace's or queue's ``core``, else
# ``default_core()``): its encoder of the common values (the same bytes, or None for a value it
# leaves to the json encoder above) and its digest test (``_HEX.fullmatch``'s answer for a str).


def canonical(name: str, queue: str | None = None, args: Any = None, core: Core | None = None) -> bytes:
    """The bytes that are hashed: ``[name, queue, args]`` as canonical JSON, UTF-8 (encoded by
    ``core``, by default the process's; every core gives the same bytes)."""
    return (core or default_core())._canonical_json(name, queue, args) or _json(name, queue, args)


def _json(name: str, queue: str | None, args: Any) -> bytes:
    """:func:`canonical` by the json module (for any value; the core's encoder's twin)."""
    value = [name, queue, args]
    if _ENCODE is None:
        return _ENCODER.encode(value).encode()
    try:
        text = "".join(_ENCODE(value, 0))
    except RecursionError:
        text = _ENCODER.encode(value)
    return text.encode()


def check_digest(digest: str, core: Core | None = None) -> str:
    """Return ``digest`` if it is 8 to 128 lowercase hex digits, else raise
    ``ArgumentTypeError`` (not a str) or ``ArgumentError`` (a ``ValueError``); checked first
    by ``core`` (by default the process's)."""
    if (core or default_core())._is_digest(digest):
        return digest  # without the regular expression (the core's check is cheaper)
    if not isinstance(digest, str):
        raise ArgumentTypeError(f"a digest is a str, not {type(digest).__qualname__!r}")
    if not _HEX.fullmatch(digest):
        raise ArgumentError(f"a digest is 8 to 128 lowercase hex digits, not {digest!r}")
    return digest


class Digester:
    """Computes digests with one hash: ``Digester("sha256").digest("report", "default", [42])``."""

    def __init__(self, hash: str | HashFunction = "sha256", *, core: Core | None = None) -> None:  # noqa: A002
        self._core = core  # the core that encodes and checks (None: the process's)
        # a hashlib constructor (its hex digests are 32 to 128 lowercase hex digits), or None:
        # then ``hash`` is a callable whose digests are checked
        self._new: Callable[[bytes], Any] | None = None
        if isinstance(hash, str):
            hashlib.new(hash)  # unknown names fail here, not at the first lock
            name = hash
            self._new = (
                getattr(hashlib, name)  # hashlib.sha256 etc.: faster than hashlib.new
                if name in hashlib.algorithms_guaranteed
                else lambda data: hashlib.new(name, data)
            )
        self.hash = hash

    @property
    def constructor(self) -> Callable[[bytes], Any] | None:
        """The hashlib constructor of the hash (a digest is ``constructor(data).hexdigest()``
        of :func:`canonical`'s bytes), or ``None`` for a hash function."""
        return self._new

    def digest(self, name: str, queue: str | None = None, args: Any = None) -> str:
        """The digest of job ``name`` on ``queue`` with ``args`` (any JSON-encodable value)."""
        data = canonical(name, queue, args, self._core)
        new = self._new
        if new is None:
            return check_digest(self.hash(data), self._core)  # type: ignore[operator]
        hexdigest: str = new(data).hexdigest()
        return hexdigest
