"""Commands and round trips per lock lifecycle: the numbers ``bench/budgets.toml`` gates and
``bench/lifecycle_table.py`` publishes.

A lifecycle is the realistic path of one job: a producer-side lock object runs
:meth:`~fastlock.Lock.enqueue`, a different worker-side object runs
:meth:`~fastlock.Lock.execute` of a job that succeeds, each job with its own digest; ttl on.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable

from ..locks.manager import LockManager
from ..locks.types import LockType
from ..sync.client import Client
from .commandstats import Cost, measure_cost

__all__ = ["OPTION_VARIANTS", "lifecycle", "measure_lifecycles", "measure_options"]

OPTION_VARIANTS: dict[str, dict[str, object]] = {
    "tracking + fencing (default)": {},
    "changelog on (max_history=1000)": {"max_history": 1000},
    "tracking off": {"track": False},
    "fencing off": {"fencing": False},
    "tracking and fencing off": {"track": False, "fencing": False},
}


def lifecycle(manager: LockManager, kind: LockType, ttl: float = 60.0) -> Callable[[], None]:
    """One job's lifecycle per call: enqueue on one lock object, execute on another (every
    job of every call to this function has a digest of its own)."""
    jobs = itertools.count()
    name = f"lifecycle:{kind.value}:{uuid.uuid4().hex}"

    def run() -> None:
        n = next(jobs)
        job_id = f"job-{n}"
        producer = manager.lock(name, args=[n], type=kind, ttl=ttl)
        worker = manager.lock(name, args=[n], type=kind, ttl=ttl)
        producer.enqueue(job_id)
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
