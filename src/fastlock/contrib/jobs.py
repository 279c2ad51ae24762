""":class:`UniqueJob`: one task's lock settings, shared by the integrations. A task's lock is
named by the framework's own job identity: the task (or function) name, the queue when the
framework binds jobs to one, and the arguments as ``[args, kwargs]`` in the canonical JSON of
:mod:`fastlock.digest` (dates, datetimes, Decimals and UUIDs as their text). The producer
computes the digest once and the job carries it to the worker under :data:`DIGEST_KEY` (in its
headers or meta); a worker computes it only for a job without one (sent by an older producer,
or without the integration), and gets the same digest."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..locks.lock import Lock
from ..locks.options import LockOptions
from ..locks.types import LockType, missing_ttl
from ..sync.client import Client

__all__ = ["DIGEST_KEY", "UniqueJob"]

DIGEST_KEY = "fastlock_digest"
"""The name under which a job carries its lock's digest (a Celery header, an RQ meta key)."""


class UniqueJob:
    """The lock of task ``name`` (``options``: :class:`~fastlock.locks.options.LockOptions`).

    ``release_on_failure`` (default True): a job that fails for good (no retry left) frees its
    lock, so the same job can be enqueued again at once; False keeps the lock type's own rule
    (until_executed then holds the lock until its ``ttl``). An until_expired lock is never
    released early, and the runtime lock of the while_executing types is always freed when the
    job ends."""

    def __init__(self, name: str, options: LockOptions, *, release_on_failure: bool = True) -> None:
        if "ttl" not in options:  # refused where the task is declared, not at its first job
            raise missing_ttl(options.get("timeout"))
        self.name = name
        self.options = options
        self.release_on_failure = release_on_failure

    def lock(
        self,
        client: Client,
        queue: str | None,
        args: Sequence[Any],
        kwargs: Mapping[str, Any] | None,
        digest: str | None = None,
    ) -> Lock:
        """The lock of one call: on ``digest``, the one the job carries, else on the digest of
        (name, queue, ``[args, kwargs]``)."""
        if digest is not None:
            return client.locks.lock(self.name, digest=digest, **self.options)
        return client.locks.lock(
            self.name, queue=queue, args=[list(args), dict(kwargs or {})], **self.options
        )

    def failed(self, lock: Lock, job_id: str) -> None:
        """The job ``job_id`` failed for good: free its lock if ``release_on_failure`` says so."""
        if self.release_on_failure and lock.type is not LockType.UNTIL_EXPIRED:
            lock.release(job_id)
