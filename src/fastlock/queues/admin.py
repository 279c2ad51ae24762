"""A queue's admin, written once for every transport: the checked arguments of each admin
call, the parsers of their replies, and the operations of several steps. Every call is
bounded by its arguments, never by the queue's size (``lua/queue_peek.lua``,
``queue_job.lua``, ``queue_cancel.lua``; HSCAN for unique locks). :class:`~fastlock.Queue`
wraps them in methods; ``python -m fastlock queue ...`` prints them.

Jobs are found by id without an index (the job words carry the state, see docs/queues.md),
so :func:`job` and :func:`cancel` search a bounded window at each end of each structure:
a job deeper in a backlog longer than twice the window is reported as ``queued``."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..exceptions import ArgumentError, ArgumentTypeError
from ..operations import Command, Commands, Operation
from .base import CANCELLED_KEPT, MAX_BATCH, checked_int
from .ids import due_ms
from .jobs import PAUSED, Member, command_replies, unexpected

__all__ = [
    "ISO_UTC",
    "OLDEST_LOOK",
    "MAX_WINDOW",
    "PREVIEW",
    "STATES",
    "WINDOW",
    "Cancelled",
    "JobInfo",
    "Page",
    "UniqueLock",
    "cancel_args",
    "describe_time",
    "cancelled",
    "job_args",
    "job_info",
    "oldest_commands",
    "oldest_ready",
    "page",
    "peek_args",
    "unique_lock",
    "unique_locks",
]

STATES = ("ready", "delayed", "active", "dead")
"""The states :func:`peek_args` pages through."""
WINDOW = 1000
"""Entries searched at each end of each structure by a lookup or cancel (default)."""
MAX_WINDOW = 10_000
PREVIEW = 200
"""Bytes of payload a lookup returns (payloads over 1 MiB give no preview)."""


ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"


def describe_time(at: float | None, now: float, stamp: str = ISO_UTC) -> str:
    """A server time (``at``, s since the epoch; ``None``: "") as UTC in the ``strftime``
    format ``stamp`` and its distance from ``now``: ``"<stamp> (in 2.0 s)"``, ``"(... 2.0 s ago)"``."""
    if at is None:
        return ""
    delta = at - now
    distance = f"in {delta:.1f} s" if delta >= 0 else f"{-delta:.1f} s ago"
    return f"{time.strftime(stamp, time.gmtime(at))} ({distance})"


@dataclass(frozen=True, slots=True)
class JobInfo:
    """What the server holds about one job.

    ``state``: ``ready``, ``delayed``, ``active`` (leased), ``dead``, ``queued`` (its payload
    is there but it was not found in the search windows: deep in a long backlog),
    ``cancelled`` (cancelled while it ran, among the last :data:`CANCELLED_KEPT`) or
    ``missing``. ``at``: the due time (delayed), the lease deadline (active), the time of
    death (dead) or of the cancel (cancelled), in seconds since the epoch (server clock).
    ``attempts``: runs so far (for an active job, counting this one). ``priority``: the level, or ``None``.
    ``unique``: the digest of its ``until_executed``/``until_executing`` lock, or ``""``.
    ``token``: the fencing token of an active lease. ``payload_size``: ``None`` when the
    payload is gone. ``preview``: the payload's first :data:`PREVIEW` bytes (lookups
    only). ``error``: a dead job's last error. ``progress``: the last
    :meth:`Queue.progress <fastlock.Queue.progress>` value (lookups only; kept for a day after
    its update, also once the job ended), or ``None``."""

    id: str
    state: str
    attempts: int | None = None
    priority: int | None = None
    unique: str = ""
    at: float | None = None
    token: int | None = None
    payload_size: int | None = None
    preview: bytes | None = None
    error: str | None = None
    progress: Any = None


class Page(NamedTuple):
    """One page of :meth:`Queue.peek <fastlock.Queue.peek>`: ``total`` jobs in ``state``
    (server clock ``now``, seconds), ``jobs`` from ``offset`` on."""

    state: str
    offset: int
    total: int
    now: float
    jobs: list[JobInfo]


class Cancelled(NamedTuple):
    """A :meth:`Queue.cancel <fastlock.Queue.cancel>`: whether the job was cancelled, and the
    state it was (or is still) in (``active``: it was running, its worker stops it)."""

    done: bool
    state: str


class UniqueLock(NamedTuple):
    """A queue's unique lock: its digest, the job that owns it, its kind (``held``: an
    ``until_executed``/``until_executing`` lock, released by the job; ``ttl``: an
    ``until_expired`` one) and, for ``ttl``, the seconds it has left."""

    digest: str
    job_id: str
    kind: str
    ttl: float | None = None


# ---- arguments (checked: nothing is sent when one is wrong)


def _job_id(job_id: object) -> str:
    if not isinstance(job_id, str) or not job_id:
        raise ArgumentTypeError(f"a job id is a non-empty str, not {job_id!r:.60}")
    return job_id


def peek_args(state: str, offset: int, count: int) -> tuple[str, int, int]:
    """Arguments of ``queue_peek``."""
    if state not in STATES:
        raise ArgumentError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    return state, checked_int(offset, "offset", 0), checked_int(count, "count", 1, MAX_BATCH)


def job_args(job_id: str, window: int, preview: int = PREVIEW) -> tuple[str, int, int]:
    """Arguments of ``queue_job``."""
    return _job_id(job_id), checked_int(window, "window", 1, MAX_WINDOW), preview


def cancel_args(job_id: str, window: int) -> tuple[str, int, int]:
    """Arguments of ``queue_cancel``."""
    return _job_id(job_id), checked_int(window, "window", 1, MAX_WINDOW), CANCELLED_KEPT


# ---- reply parsers


def _from_entry(entry: bytes, score: Any, size: int, error: Any, state: str) -> JobInfo:
    """The job named by a word, a lease member or (dead) an id, with its score."""
    at = float(score) / 1000 if score not in (b"", None) else None
    payload_size = None if size < 0 else size
    if state == "dead":
        attempts, priority, text = (error or b"0||").split(b"|", 2)
        return JobInfo(entry.decode(), state, int(attempts), int(priority) if priority else None,
                       "", at, None, payload_size, None, text.decode())  # fmt: skip
    token = None
    if state == "active":
        token, attempts, level, unique, job_id = Member.decode(entry)
    else:
        word = entry.split(b"|", 3)
        attempts, level, unique, job_id = int(word[0]), word[1].decode(), word[2].decode(), word[3].decode()
    priority = int(level) if level else None
    return JobInfo(job_id, state, attempts, priority, unique[1:], at, token, payload_size)


def page(reply: Any, state: str, offset: int) -> Page:
    """The page of a ``queue_peek`` reply ``{now, total, entry, score, size, error, ...}``."""
    try:
        now, total, *rows = reply
        if len(rows) % 4:
            raise ValueError(reply)
        columns = rows[0::4], rows[1::4], rows[2::4], rows[3::4]
        jobs = [_from_entry(*row, state) for row in zip(*columns, strict=True)]
        return Page(state, offset, int(total), now / 1000, jobs)
    except (TypeError, ValueError, AttributeError, IndexError):
        raise unexpected("queue_peek", reply) from None


def job_info(reply: Any, job_id: str) -> JobInfo:
    """The job of a ``queue_job`` reply ``{state, entry, score, size, preview, error,
    progress}``."""
    try:
        state, entry, score, size, preview, error, progress = reply
        state = state.decode()
        shown = None if progress is None else json.loads(progress)
        if state in ("missing", "queued", "cancelled"):
            size = None if size < 0 else size
            at = float(score) / 1000 if state == "cancelled" else None
            return JobInfo(job_id, state, at=at, payload_size=size, preview=preview or None, progress=shown)
        if state not in STATES:
            raise ValueError(reply)
        info = _from_entry(job_id.encode() if state == "dead" else entry, score, size, error, state)
        if info.id != job_id:
            raise ValueError(reply)
        return replace(info, preview=preview or None, progress=shown)
    except (TypeError, ValueError, AttributeError, IndexError):
        raise unexpected("queue_job", reply) from None


def cancelled(reply: Any) -> Cancelled:
    """The outcome of a ``queue_cancel`` reply ``{done, state}``."""
    try:
        done, state = reply
        if done not in (0, 1):
            raise ValueError(reply)
        return Cancelled(done == 1, state.decode())
    except (TypeError, ValueError, AttributeError):
        raise unexpected("queue_cancel", reply) from None


# ---- operations of several steps


def unique_locks(key: str, cursor: int, count: int) -> Operation[tuple[int, list[UniqueLock]]]:
    """One HSCAN page of a queue's ``held`` unique locks (hash ``key``): ``(next cursor,
    locks)``; cursor 0 starts and ends the walk. ``until_expired`` locks are keys of their
    own: look them up by digest (:func:`unique_lock`)."""
    checked_int(cursor, "cursor", 0, 2**64 - 1)
    reply = yield Command(("HSCAN", key, cursor, "COUNT", checked_int(count, "count", 1, MAX_BATCH)))
    try:
        next_cursor, flat = reply
        locks = [UniqueLock(flat[i].decode(), flat[i + 1].decode(), "held") for i in range(0, len(flat), 2)]
        return int(next_cursor), locks
    except (TypeError, ValueError, AttributeError, IndexError):
        raise unexpected("HSCAN", reply) from None


def unique_lock(key: str, prefix: str, digest: str) -> Operation[UniqueLock | None]:
    """The unique lock on ``digest`` in a queue (unique hash ``key``, key prefix ``prefix``),
    ``held`` or ``ttl``, or ``None`` when free: one round trip."""
    if not isinstance(digest, str) or not digest:
        raise ArgumentTypeError("a digest is a non-empty str")
    ttl_key = f"{prefix}u:{digest}"
    commands = [("HGET", key, digest), ("GET", ttl_key), ("PTTL", ttl_key)]
    held, owner, ms = command_replies((yield Commands(commands)), 3, "unique lock")
    if held is not None:
        return UniqueLock(digest, held.decode(), "held")
    if owner is not None:
        return UniqueLock(digest, owner.decode(), "ttl", ms / 1000 if ms >= 0 else None)
    return None


OLDEST_LOOK = 4
"""Words at the claiming end of ready :func:`oldest_ready` looks at for a first attempt's."""


def oldest_commands(ready: str, prio: str) -> list[tuple[Any, ...]]:
    """The commands of :func:`oldest_ready`: the last words of ``ready`` (the next claimed),
    the first of the prioritised lane, the server's time (last: a cluster routes by the first
    command's key)."""
    return [("LRANGE", ready, -OLDEST_LOOK, -1), ("ZRANGE", prio, 0, 0), ("TIME",)]


def oldest_ready(replies: list[Any]) -> float | None:
    """Seconds since the job a claim would take next became due (server's now, the due time
    its producer wrote in its fresh id): of the plain lane's next first attempt (among its last
    :data:`OLDEST_LOOK` words) and the prioritised lane's next, the older; ``None`` when
    neither is known (nothing ready, given ids, retries)."""
    tail, first, (seconds, micros) = command_replies(replies, 3, "oldest_ready")
    now = int(seconds) * 1000 + int(micros) // 1000
    dues = []
    for lane in (reversed(tail), first):
        for word in lane:
            if word == PAUSED:
                continue
            attempts, _, rest = word.partition(b"|")
            due = due_ms(rest.split(b"|", 2)[-1].decode()) if attempts == b"0" else None
            if due is not None:
                dues.append(due)
                break
    return max(0.0, (now - min(dues)) / 1000) if dues else None
