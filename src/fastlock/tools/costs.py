"""What an operation costs the server: commands (inner Lua calls included) and round trips,
for any operation and for the lock lifecycles ``bench/budgets.toml`` gates and
``bench/lifecycle_table.py`` publishes.

Commands are read from ``INFO commandstats`` after ``CONFIG RESETSTAT`` (Redis and Valkey
count every ``redis.call`` inside a script there, plus the ``EVALSHA`` itself); round
trips are the writes fastlock's connections sent. Use a server nobody else is talking to.

A lifecycle is the realistic path of one job, as the integrations (:mod:`fastlock.contrib`)
run it: a producer-side lock object, built from the job's name and arguments, runs
:meth:`~fastlock.Lock.enqueue`; the job carries the digest to the worker, whose own lock
object, built from that digest, runs :meth:`~fastlock.Lock.execute` of a job that succeeds.
Each job has its own digest, computed once; ttl on.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..locks.manager import LockManager
from ..locks.types import LockType
from ..sync.client import Client

__all__ = [
    "OPTION_VARIANTS",
    "Cost",
    "command_calls",
    "lifecycle",
    "measure_cost",
    "measure_lifecycles",
    "measure_options",
]

_BOOKKEEPING = frozenset({"info", "config|resetstat", "config"})

OPTION_VARIANTS: dict[str, dict[str, object]] = {
    "tracking + fencing (default)": {},
    "changelog on (max_history=1000)": {"max_history": 1000},
    "tracking off": {"track": False},
    "fencing off": {"fencing": False},
    "tracking and fencing off": {"track": False, "fencing": False},
}


@dataclass(frozen=True)
class Cost:
    """Totals over ``operations`` runs of one operation, and their per-operation figures."""

    operations: int
    commands: int
    round_trips: int
    by_command: dict[str, int] = field(default_factory=dict)

    @property
    def commands_per_op(self) -> float:
        return self.commands / self.operations

    @property
    def round_trips_per_op(self) -> float:
        return self.round_trips / self.operations


def command_calls(client: Client) -> dict[str, int]:
    """``{command: calls}`` from ``INFO commandstats``, without the bookkeeping commands."""
    text = client.execute("INFO", "commandstats").decode()
    calls: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("cmdstat_"):
            name, _, stats = line[len("cmdstat_") :].partition(":")
            if name not in _BOOKKEEPING:
                calls[name] = int(stats.split(",")[0].split("=")[1])
    return calls


def measure_cost(
    client: Client,
    operation: Callable[[], object],
    operations: int = 100,
    *,
    clients: Iterable[Client] = (),
) -> Cost:
    """Run ``operation`` ``operations`` times and count server commands and round trips.

    ``client`` reads the statistics; round trips are summed over ``client`` and ``clients``
    (other clients the operation uses).
    """
    counted = [client, *clients]
    client.execute("CONFIG", "RESETSTAT")
    before = sum(c.pool.round_trips for c in counted)
    for _ in range(operations):
        operation()
    round_trips = sum(c.pool.round_trips for c in counted) - before
    calls = command_calls(client)
    return Cost(operations, sum(calls.values()), round_trips, calls)


def lifecycle(manager: LockManager, kind: LockType, ttl: float = 60.0) -> Callable[[], None]:
    """One job's lifecycle per call: enqueue on a lock object built from the job's name and
    arguments, execute on another built from the digest the job carries (every job of every
    call to this function has a digest of its own)."""
    jobs = itertools.count()
    name = f"lifecycle:{kind.value}:{uuid.uuid4().hex}"

    def run() -> None:
        n = next(jobs)
        job_id = f"job-{n}"
        producer = manager.lock(name, args=[n], type=kind, ttl=ttl)
        producer.enqueue(job_id)
        worker = manager.lock(name, digest=producer.digest, type=kind, ttl=ttl)
        worker.execute(job_id, _job)

    return run


def _job() -> None:
    return None


def _measure(client: Client, manager: LockManager, kind: LockType, operations: int) -> Cost:
    run = lifecycle(manager, kind)
    run()  # loads the scripts: NOSCRIPT recovery is not part of a lifecycle
    return measure_cost(client, run, operations)


def measure_lifecycles(
    client: Client, *, max_history: int = 0, operations: int = 100
) -> dict[LockType, Cost]:
    """Cost of ``operations`` lifecycles of every lock type (a private server: it resets stats)."""
    manager = LockManager(client, prefix="cost", max_history=max_history)
    return {kind: _measure(client, manager, kind, operations) for kind in LockType}


def measure_options(client: Client, operations: int = 100) -> dict[str, Cost]:
    """Cost of an until_executed lifecycle under each of :data:`OPTION_VARIANTS`."""
    costs = {}
    for label, options in OPTION_VARIANTS.items():
        manager = LockManager(client, prefix="cost", **options)  # type: ignore[arg-type]
        costs[label] = _measure(client, manager, LockType.UNTIL_EXECUTED, operations)
    return costs
