"""What changes a job after its enqueue, written once for every transport: the checked
arguments of an enqueue that replaces or extends a waiting duplicate (``on_duplicate``) and of
a holder's progress (nothing is sent when one is wrong). The scripts: ``lua/queue_enqueue.lua``
and ``lua/queue_progress.lua``; docs/queues.md, "Debounce and replace" and "Progress"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..exceptions import ArgumentError, ArgumentTypeError
from .base import QueueBase
from .jobs import Job

__all__ = ["KEEP", "PROGRESS_KEEP", "PROGRESS_LIMIT", "REPLACE_WINDOW", "on_duplicate_call", "progress_call"]

REPLACE_WINDOW = 1000
"""Newest entries of the ready list an ``on_duplicate`` enqueue searches for the waiting job
(the delayed set and the prioritised lane are looked up directly)."""
PROGRESS_LIMIT = 4096
"""Most bytes of a job's progress (its JSON text, UTF-8)."""
PROGRESS_KEEP = 86_400
"""Seconds a job's progress is kept after its last update (the job's end does not delete it)."""
KEEP = "keep"
"""``on_duplicate``'s default: a held unique lock refuses the enqueue (:class:`DuplicateJob`)."""
_ON_DUPLICATE = {"replace": "r", "extend": "e"}


def on_duplicate_call(
    call: tuple[Sequence[str], tuple[Any, ...]], on_duplicate: object
) -> tuple[Sequence[str], tuple[Any, ...]]:
    """``queue_enqueue``'s ``call`` (keys, arguments) with the letter of ``on_duplicate``
    (``keep`` leaves it as it is)."""
    keys, args = call
    action = _ON_DUPLICATE.get(on_duplicate) if isinstance(on_duplicate, str) else None
    if action is None:
        if on_duplicate == "keep":
            return call
        raise ArgumentError(f"on_duplicate is 'keep', 'replace' or 'extend', not {on_duplicate!r}")
    if len(args) < 7 or not args[4]:  # a plain call, or no unique mode
        raise ArgumentError(f"on_duplicate={on_duplicate!r} needs a unique lock (unique=...)")
    if action == "e" and not args[2]:
        raise ArgumentError("on_duplicate='extend' pushes a delay back: give a delay > 0")
    return keys, (*args, action)


def progress_call(
    queue: QueueBase[Any], job: Job, value: object
) -> tuple[tuple[str, ...], tuple[bytes, str, int]]:
    """Keys and arguments of ``queue_progress``: ``value`` as compact JSON, at most
    :data:`PROGRESS_LIMIT` bytes."""
    if not isinstance(job, Job):
        raise ArgumentTypeError(f"expected a Job from a claim, not {type(job).__qualname__!r}")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except TypeError as exc:
        raise ArgumentTypeError(f"progress must be JSON data: {exc}") from None
    except ValueError as exc:  # NaN or infinity, a circular reference
        raise ArgumentError(f"progress must be JSON data: {exc}") from None
    size = len(text.encode())
    if size > PROGRESS_LIMIT:
        raise ArgumentError(f"progress is {size} bytes as JSON, over the limit of {PROGRESS_LIMIT}")
    return (*queue.keys, queue.progress_key(job.id)), (job.member, text, PROGRESS_KEEP * 1000)
