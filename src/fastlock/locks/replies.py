"""Parsers of the lock scripts' and lock commands' replies: each checks the reply's shape and
raises :class:`~fastlock.ProtocolError` (via :func:`unexpected_reply`) for any other; and what
an acquire's and a lost release's reply mean to the caller (:func:`token`,
:func:`lost_before_release`)."""

from __future__ import annotations

import logging
import re
from typing import Any

from .. import metrics
from ..exceptions import ProtocolError
from .keys import ChangelogEntry, LockEntry
from .types import Holder, LockType

__all__ = [
    "acquire_reply",
    "changelog_reply",
    "count_reply",
    "entries_reply",
    "holders_reply",
    "lost_before_release",
    "parse_slot",
    "reap_reply",
    "token",
    "token_reply",
    "unexpected_reply",
]

logger = logging.getLogger("fastlock.lock")
_SLOT = re.compile(rb"(\d+):[0-3]:(.+)", re.DOTALL)


def unexpected_reply(script: str, reply: object) -> ProtocolError:
    """The error for a reply no built-in ``script`` gives (another script under its name?)."""
    return ProtocolError(f"unexpected reply from lock script {script}: {reply!r:.200}")


def parse_slot(value: object, script: str) -> tuple[int, str]:
    """``(token, job id)`` of a slot value ``b"<token>:<waited>:<job_id>"`` in ``script``'s reply."""
    match = _SLOT.fullmatch(value) if type(value) is bytes else None
    try:
        if match is not None:
            return int(match[1]), match[2].decode()
    except UnicodeDecodeError:
        pass
    raise unexpected_reply(script, value)


def acquire_reply(script: str, reply: Any) -> Any:
    """An acquire (or handoff) reply: the fencing token, or the conflict ``[ms to expiry, holders...]``."""
    if type(reply) is int and reply > 0:
        return reply
    if type(reply) is list and reply and type(reply[0]) is int and all(type(h) is bytes for h in reply[1:]):
        return reply
    raise unexpected_reply(script, reply)


def token_reply(script: str, reply: object) -> int | None:
    """A release or extend reply: the fencing token, ``None`` for 0 (nothing held)."""
    if type(reply) is int and reply >= 0:
        return reply or None
    raise unexpected_reply(script, reply)


def count_reply(script: str, reply: object) -> int:
    """A count (``lock_delete``: holders deleted)."""
    if type(reply) is int and reply >= 0:
        return reply
    raise unexpected_reply(script, reply)


def holders_reply(reply: object, runtime: bool = False) -> list[Holder]:
    """Holders from a ``lock_inspect`` reply: ``[value, pttl, ...]``."""
    if type(reply) is not list or len(reply) % 2:
        raise unexpected_reply("lock_inspect", reply)
    holders = []
    for value, pttl in zip(reply[::2], reply[1::2], strict=True):
        token, job = parse_slot(value, "lock_inspect")
        if type(pttl) is not int:
            raise unexpected_reply("lock_inspect", reply)
        holders.append(Holder(job, token, pttl / 1000 if pttl >= 0 else None, runtime))
    return holders


def reap_reply(reply: object) -> tuple[int, list[tuple[bytes, list[tuple[int, str]]]]]:
    """A ``lock_reap`` reply ``[dropped, (scope, n, value * n)...]``: the number of entries
    dropped, and each live scope with its holders' ``(token, job id)``."""
    if type(reply) is not list or not reply or type(reply[0]) is not int:
        raise unexpected_reply("lock_reap", reply)
    live = []
    i = 1
    while i < len(reply):
        scope = reply[i]
        count = reply[i + 1] if i + 1 < len(reply) else None
        if type(scope) is not bytes or type(count) is not int or not 0 < count <= len(reply) - i - 2:
            raise unexpected_reply("lock_reap", reply)
        live.append((scope, [parse_slot(value, "lock_reap") for value in reply[i + 2 : i + 2 + count]]))
        i += 2 + count
    return reply[0], live


def entries_reply(members: list[bytes]) -> list[LockEntry]:
    """Index entries from a ``ZRANGE`` of a bucket's index."""
    return [LockEntry.parse(member) for member in members]


def changelog_reply(records: list[Any], digest: str) -> list[ChangelogEntry]:
    """``digest``'s entries of an ``XREVRANGE`` of a bucket's changelog, in its order."""
    entries = []
    for entry_id, fields in records:
        record = dict(zip(fields[::2], fields[1::2], strict=True))
        scope = record[b"lock"].decode()
        if scope.split(":", 1)[0] == digest:
            time_ms = int(entry_id.split(b"-")[0])
            job, token = record[b"job"].decode(), int(record[b"token"])
            entries.append(ChangelogEntry(time_ms, record[b"event"].decode(), scope, job, token))
    return entries


def token(reply: Any) -> int | None:
    """An acquire's result as the public API gives it: the fencing token, or ``None``."""
    return reply if type(reply) is int else None


def lost_before_release(job_id: str, digest: str, lock_type: LockType) -> None:
    """Log (and report) a job that returned without holding its until_executed lock any more."""
    logger.warning("job %s finished without holding lock %s (expired or deleted)", job_id, digest)
    if (observer := metrics.observer) is not None:
        observer.lock_lost(lock_type.value)
