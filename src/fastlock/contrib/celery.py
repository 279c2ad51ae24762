"""Unique tasks for `Celery <https://docs.celeryq.dev>`_: one base class.

::

    from fastlock.contrib.celery import UniqueTask

    @app.task(base=UniqueTask, unique_lock={"ttl": 600})      # until_executed by default
    def send_invoice(customer_id: int, day: date) -> None: ...

    send_invoice.delay(42, date.today())    # None: the same task is pending

``apply_async`` (and so ``delay``) takes the lock for the task id, then sends the task; it
returns ``None`` without sending when the lock is held (or what the lock's enqueue-side
``on_conflict`` strategy says: ``"raise"`` raises :class:`~fastlock.LockConflictError`). The
worker runs the task under the lock type (:meth:`Lock.execute <fastlock.Lock.execute>`):
until_executed frees the lock after success, the while_executing types run one task per digest
at a time (waiting up to ``timeout``). ``self.retry()`` keeps the lock (the retry is the same
task id); a task that fails for good frees it in ``on_failure`` (unless
``release_on_failure = False``). A worker killed mid-task leaves the lock to its ``ttl``.

``unique_lock`` holds the lock options (:class:`~fastlock.locks.options.LockOptions`). The
digest is the task's name and ``[args, kwargs]`` (no queue: a Celery task name is global),
whatever the serializer does to dates, Decimals or UUIDs (they digest as their text). The
producer computes it and sends it in the task's ``fastlock_digest`` header; the worker locks
that digest, computing it only for a task sent without the header. The lock server is
``lock_url``, else the app's ``fastlock_url`` setting, else its Redis ``broker_url``; one
:class:`~fastlock.Client` per process and URL.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from celery import Task
from celery.utils import uuid

from ..exceptions import ArgumentError
from ..locks.lock import Lock
from ..locks.options import LockOptions
from .clients import client_for_url
from .jobs import DIGEST_KEY, UniqueJob

__all__ = ["UniqueTask"]

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class UniqueTask(Task):  # type: ignore[misc]  # celery is untyped
    """A Celery task whose calls are unique (see the module docstring); set ``unique_lock``,
    and optionally ``lock_url`` and ``release_on_failure``, as ``@app.task`` options."""

    abstract = True
    unique_lock: ClassVar[LockOptions | None] = None  # required: its ttl is (seconds or None)
    lock_url: ClassVar[str | None] = None
    release_on_failure: ClassVar[bool] = True

    @functools.cached_property
    def unique_job(self) -> UniqueJob:
        """This task's lock settings."""
        if self.unique_lock is None:
            raise ArgumentError(
                f"UniqueTask {self.name}: give its lock options, unique_lock={{'ttl': <seconds>}} "
                "(or 'ttl': None, a lock that never expires), to @app.task"
            )
        return UniqueJob(self.name, self.unique_lock, release_on_failure=self.release_on_failure)

    def lock(
        self, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None, *, digest: str | None = None
    ) -> Lock:
        """The lock of this task called with ``args`` and ``kwargs`` (on ``digest`` when given:
        the one a sent task carries)."""
        conf = self.app.conf
        url = self.lock_url or conf.get("fastlock_url") or conf.broker_url or ""
        if not url.startswith(_REDIS_SCHEMES):
            raise ArgumentError(f"task {self.name}: set lock_url or fastlock_url to a Redis URL, not {url!r}")
        return self.unique_job.lock(client_for_url(url), None, args or (), kwargs, digest)

    def _carried(self, task_id: str | None) -> str | None:
        """The digest the running task ``task_id`` was sent with (``None``: none, or not running)."""
        request = self.request
        return request.get(DIGEST_KEY) if request.id is not None and request.id == task_id else None

    def apply_async(
        self, args: Sequence[Any] | None = None, kwargs: Mapping[str, Any] | None = None, **options: Any
    ) -> Any:
        """Send the task unless the same task holds the lock: its ``AsyncResult``, or ``None``."""
        task_id = options.get("task_id") or uuid()
        lock = self.lock(args or (), kwargs)
        if not lock.enqueue(task_id):
            return None
        headers = {**(options.get("headers") or {}), DIGEST_KEY: lock.digest}
        try:
            return super().apply_async(args, kwargs, **{**options, "task_id": task_id, "headers": headers})
        except BaseException:
            lock.release(task_id)
            raise

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.id is None or request.called_directly:
            return super().__call__(*args, **kwargs)
        # in a worker the tracer has pushed the request: run the body without a new one
        lock = self.lock(args, kwargs, digest=self._carried(request.id))
        return lock.execute(request.id, functools.partial(self.run, *args, **kwargs))

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        """The task failed for good: free its lock (unless ``release_on_failure`` is False)."""
        self.unique_job.failed(self.lock(args, kwargs, digest=self._carried(task_id)), task_id)
        super().on_failure(exc, task_id, args, kwargs, einfo)
