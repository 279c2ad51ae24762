"""The lock admin's boundaries: each page of a walk is bounded whatever the namespace holds,
and a queue's unique locks live with their queue (shown by the queue admin), not here."""

from __future__ import annotations

import fastlock
from fastlock.locks.admin import BUCKETS_PER_CALL
from fastlock.queues.jobs import Unique
from fastlock.tools.costs import measure_cost


def test_each_page_of_a_walk_is_bounded(client: fastlock.Client) -> None:
    manager = fastlock.LockManager(client, buckets=1024)
    for i in range(2000):
        manager.lock(f"res{i}", ttl=60).acquire("job")
    assert len(list(manager.entries(count=500))) == 2000
    cost = measure_cost(client, lambda: manager.scan("0", count=100), 3)
    assert cost.by_command == {"zrange": cost.commands}  # ZRANGE ... BYLEX LIMIT only
    assert cost.commands_per_op <= BUCKETS_PER_CALL
    sparse = fastlock.LockManager(client, prefix="sparse", buckets=4096)  # empty: bucket by bucket
    cursor, found = sparse.scan("0", count=100)
    assert (found, cursor) == ([], f"{BUCKETS_PER_CALL}:")


def test_queue_unique_locks_live_with_their_queue(client: fastlock.Client) -> None:
    """A queue's unique locks are taken and released by its scripts atomically with the job,
    so they share the queue's slot (fl:{q}:unique), not a lock bucket's: the lock namespace
    does not list them; the queue admin does."""
    queue = client.queue("orders")
    unique = Unique("SendInvoice", args=[42])
    job_id = queue.enqueue(b"42", unique=unique)
    digest = queue.unique_digest(unique)
    assert digest == client.locks.digest("SendInvoice", "orders", [42])  # the lock API's digest
    assert list(client.locks.entries()) == []
    assert client.locks.inspect(digest) == []
    lock = queue.unique_lock(digest)
    assert lock is not None and (lock.job_id, lock.kind) == (job_id, "held")
    assert queue.unique_locks() == (0, [lock])
