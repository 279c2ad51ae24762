"""What a handler can ask for besides success, and how a failure is written down: :class:`Retry`
(a delay of its choosing), :class:`DeadLetter` (no more attempts), :class:`JobTimeout` (raised
by a worker's transport past ``job_timeout``), and :func:`error_text` (the dead letter's
error: the exception and its traceback, bounded)."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Generator
from typing import Any

from .. import metrics
from ..protocol.arguments import duration_ms
from .base import ERROR_LIMIT, QueueBase

__all__ = ["DeadLetter", "JobTimeout", "Retry", "error_text", "timed"]


class Retry(Exception):
    """Raised by a handler: retry this job in ``in_`` seconds (default: the queue's backoff),
    still within the queue's ``max_attempts`` (the last attempt is dead-lettered)."""

    def __init__(self, message: str = "", *, in_: float | None = None) -> None:
        super().__init__(message)
        self.in_ = None if in_ is None else duration_ms(in_, "in_", minimum_ms=0) / 1000


class DeadLetter(Exception):
    """Raised by a handler: send this job to the dead letters now, with ``reason`` as its error."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        self.reason = reason


class JobTimeout(Exception):
    """A handler ran past the worker's ``job_timeout``: its job is failed (retried or dead)."""


def timed(queue: QueueBase[Any], clock: Callable[[], float], job: Any, act: Any) -> Generator[Any, Any, Any]:
    """A plan's step running a handler on ``job`` (``act``) inside the installed observer's
    :meth:`~fastlock.metrics.Observer.processing`, its run time on ``clock`` sent to
    :meth:`~fastlock.metrics.Observer.job_ran` with how it ended."""
    observer = metrics.observer
    if observer is None:
        return (yield act)
    started = clock()
    with observer.processing(queue.name, job):
        try:
            result = yield act
        except Exception as exc:
            observer.job_ran(queue.name, clock() - started, type(exc).__name__)
            raise
    observer.job_ran(queue.name, clock() - started, None)
    return result


def error_text(exc: BaseException) -> str:
    """A failed job's error: ``"ExcType: message"`` on the first line, then the traceback's
    last frames, at most :data:`~fastlock.queues.base.ERROR_LIMIT` characters in all."""
    head = f"{type(exc).__name__}: {exc}"[: ERROR_LIMIT // 4]
    if exc.__traceback__ is None:
        return head
    trace = "".join(traceback.format_exception(exc)).rstrip("\n")
    room = ERROR_LIMIT - len(head) - 2
    if len(trace) > room:
        trace = "..." + trace[len(trace) - room + 3 :]
    return f"{head}\n\n{trace}"
