"""Fresh job ids (written by :func:`fastlock._ids.fresh`): ``~``, the time the job is due in
hex (its producer's clock, ms since the epoch, plus its delay), ``.``, the process's id prefix
and a counter, then maybe a trace context after ``@``; and the due time read back (the
job-wait histogram's and the oldest ready job's age: docs/observability.md). A given id never
starts with ``~``."""

from __future__ import annotations

__all__ = ["CARRY_MARK", "FRESH_MARK", "due_ms"]

CARRY_MARK = "@"
"""In a fresh id (never in a given one): a trace context follows (:mod:`fastlock.metrics`)."""
FRESH_MARK = "~"
"""The first character of a fresh job id (a given one never starts with it)."""


def due_ms(job_id: str) -> int | None:
    """When a fresh job became due (ms since the epoch, by its producer's clock), or ``None``:
    a given id, or a fresh one made by an older fastlock."""
    if job_id[:1] != FRESH_MARK:
        return None
    head, dot, _ = job_id[1:].partition(".")
    if not dot:
        return None
    try:
        return int(head, 16)
    except ValueError:
        return None
