"""Unique jobs for `RQ <https://python-rq.org>`_: one decorator.

::

    from fastlock.contrib.rq import unique

    @unique(ttl=600)                                  # until_executed by default
    def send_invoice(customer_id: int, day: date) -> None: ...

    job = send_invoice.enqueue(queue, 42, date.today())   # None: the same job is pending

``send_invoice.enqueue(queue, *args, **kwargs)`` takes what ``queue.enqueue`` takes (RQ's own
options such as ``job_timeout`` included): it takes the lock for the job's id, then enqueues,
and returns ``None`` without enqueuing when the lock is held (or what the lock's enqueue-side
``on_conflict`` strategy says: ``"raise"`` raises :class:`~fastlock.LockConflictError`). When
RQ runs the job, the decorated function applies the lock type (:meth:`Lock.execute
<fastlock.Lock.execute>`): until_executed frees the lock after success, the while_executing
types run one job per digest at a time (waiting up to ``timeout``), also for jobs enqueued with
plain ``queue.enqueue``. A job that fails with no RQ retry left frees its lock (unless
``release_on_failure=False``); a job with retries left keeps it for the retry.

The digest is the function's RQ name (``module.qualname``), the queue's name and
``[args, kwargs]``: the producer computes it and stores it in the job's ``meta``
(``fastlock_digest``); the worker locks that digest, computing it only for a job enqueued
without it (plain ``queue.enqueue``, an older producer). The lock lives on the RQ connection's
server (one :class:`~fastlock.Client` per process and connection, built on first use), or on
``url`` if given. Called outside a worker, the function just runs.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, Unpack, cast

from rq import Queue, get_current_job
from rq.job import Job

from ..locks.lock import Lock
from ..locks.options import LockOptions
from ..sync.client import Client
from .clients import client_for_redis, client_for_url
from .jobs import DIGEST_KEY, UniqueJob

__all__ = ["UniqueFunction", "unique"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class UniqueFunction(Protocol[P, R_co]):
    """What :func:`unique` returns: the function itself (RQ imports and runs it by name), with
    :meth:`enqueue`, :meth:`lock` and its :class:`~fastlock.contrib.jobs.UniqueJob`."""

    unique_job: UniqueJob

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def enqueue(self, queue: Queue, *args: Any, **kwargs: Any) -> Job | None:
        """Enqueue unless the same job holds the lock: the RQ job, or ``None``."""
        ...

    def lock(self, queue: Queue, *args: Any, **kwargs: Any) -> Lock:
        """The lock of this function called with ``args`` and ``kwargs`` on ``queue``."""
        ...


def unique(
    *, url: str | None = None, release_on_failure: bool = True, **options: Unpack[LockOptions]
) -> Callable[[Callable[P, R]], UniqueFunction[P, R]]:
    """Make an RQ job function unique: ``options`` are the lock's (``type``, ``ttl``,
    ``timeout``, ``limit``, ``on_conflict``; see :class:`~fastlock.Lock`), ``url`` the lock
    server (default: the RQ connection's), ``release_on_failure`` the failure policy
    (:class:`~fastlock.contrib.jobs.UniqueJob`)."""

    def decorate(func: Callable[P, R]) -> UniqueFunction[P, R]:
        name = f"{func.__module__}.{func.__qualname__}"  # RQ's name of the function
        spec = UniqueJob(name, options, release_on_failure=release_on_failure)

        def client(connection: Any) -> Client:
            return client_for_url(url) if url is not None else client_for_redis(connection)

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            job = get_current_job()
            if job is None:
                return func(*args, **kwargs)
            carried = job.meta.get(DIGEST_KEY)
            lock = spec.lock(client(job.connection), job.origin, args, kwargs, carried)
            try:
                return cast(R, lock.execute(job.id, functools.partial(func, *args, **kwargs), job=job))
            except BaseException:
                if not job.retries_left:  # RQ retries a job with retries left: it keeps the lock
                    spec.failed(lock, job.id)
                raise

        def enqueue(queue: Queue, *args: Any, **kwargs: Any) -> Job | None:
            if kwargs.get("job_id") is None:
                kwargs["job_id"] = str(uuid.uuid4())
            parsed = queue.parse_args(run, *args, **dict(kwargs))
            lock = spec.lock(client(queue.connection), queue.name, parsed.args or (), parsed.kwargs)
            if not lock.enqueue(parsed.job_id):
                return None
            kwargs["meta"] = {**(kwargs.get("meta") or {}), DIGEST_KEY: lock.digest}
            try:
                return queue.enqueue(run, *args, **kwargs)
            except BaseException:
                lock.release(parsed.job_id)
                raise

        def lock(queue: Queue, *args: Any, **kwargs: Any) -> Lock:
            return spec.lock(client(queue.connection), queue.name, args, kwargs)

        wrapper = cast(Any, run)
        wrapper.unique_job, wrapper.enqueue, wrapper.lock = spec, enqueue, lock
        return cast(UniqueFunction[P, R], wrapper)

    return decorate
