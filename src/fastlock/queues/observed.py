"""What a queue reports to the installed :class:`~fastlock.metrics.Observer`, for both queue
shells (``aio/queue.py`` and the generated ``queues/queue.py``): each shell checks that an
observer is installed before it calls here, so a queue without one pays that check only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import metrics
from ..exceptions import LeaseLost
from .base import QueueBase
from .ids import due_ms
from .jobs import Batch, Job, completed

__all__ = ["claimed_observed", "completed_observed", "report"]


def report(queue: QueueBase[Any], event: str, *counts: int | bool) -> None:
    """Send ``event`` (an :class:`~fastlock.metrics.Observer` method's name) about ``queue``."""
    observer = metrics.observer
    if observer is not None:
        getattr(observer, event)(queue.name, *counts)


def completed_observed(queue: QueueBase[Any], reply: Any, jobs: Sequence[Job], claim: int) -> Batch:
    """:func:`~fastlock.queues.jobs.completed`, the completed and claimed jobs reported (the
    jobs whose lease was lost are not completed)."""
    try:
        batch = completed(reply, jobs, claim, queue.core)
    except LeaseLost as lost:
        report(queue, "jobs_completed", len(jobs) - len(lost.jobs))
        raise
    report(queue, "jobs_completed", len(jobs))
    claimed_observed(queue, reply[1] if claim else None, batch)
    return batch


def claimed_observed(queue: QueueBase[Any], reply: Any, batch: Batch) -> None:
    """Report the jobs of a claim (``reply``: its reply, ``now`` first, server ms) and how long
    the first attempts of fresh jobs waited, from when they were due (:func:`due_ms`)."""
    observer = metrics.observer
    if observer is None:
        return
    observer.jobs_claimed(queue.name, len(batch))
    if not batch:
        return
    now = reply[0]
    waits = [(now - due) / 1000 for job in batch if job.attempt == 1 and (due := due_ms(job.id)) is not None]
    if waits:
        observer.jobs_waited(queue.name, [max(0.0, wait) for wait in waits])
