"""Cluster key slots: CRC16 (XMODEM) of the key, or of its ``{hash tag}``, modulo 16384."""

from __future__ import annotations

from collections.abc import Iterable

from ..exceptions import ArgumentError, ArgumentTypeError

__all__ = ["SLOTS", "hash_tag", "key_slot", "same_slot", "tagged_base"]

SLOTS = 16384


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
        table.append(crc)
    return table


_TABLE = _crc16_table()


def hash_tag(key: bytes) -> bytes:
    """The part of ``key`` that is hashed: between the first ``{`` and the next ``}``,
    when that is non-empty; otherwise the whole key."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


def key_slot(key: str | bytes) -> int:
    """The cluster slot of ``key``."""
    data = hash_tag(key.encode() if isinstance(key, str) else key)
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc % SLOTS


def same_slot(keys: Iterable[str | bytes]) -> bool:
    """True when all ``keys`` hash to one slot (vacuously true for none)."""
    return len({key_slot(key) for key in keys}) <= 1


def tagged_base(prefix: object, name: object, what: str) -> str:
    """The key prefix ``<prefix>:<name>:`` of a queue or limiter (``what``) named ``name``: a
    name without a ``{tag}`` is wrapped in one, so its keys share one slot. Refuses names and
    prefixes that would spread the keys over several slots, or give two names the same keys."""
    if not isinstance(name, str) or not isinstance(prefix, str):
        raise ArgumentTypeError(f"a {what}'s name and prefix must be str")
    tag = hash_tag(name.encode()).decode()
    if tag == name:  # no {tag}: wrapped in one, so it may not hold braces itself
        if not name or "{" in name or "}" in name:
            raise ArgumentError(f"{what} name {name!r}: give a non-empty name without braces, or a {{tag}}")
        base = f"{prefix}:{{{name}}}:"
    elif name == f"{{{tag}}}":
        raise ArgumentError(f"{what} name {name!r} would share its keys with {what} {tag!r}: name it {tag!r}")
    else:
        base = f"{prefix}:{name}:"
    if hash_tag(base.encode()) == base.encode():
        raise ArgumentError(f"prefix {prefix!r} breaks the {what}'s hash tag (an empty {{}})")
    return base
