"""What an operation costs the server: commands (inner Lua calls included) and round trips.

Commands are read from ``INFO commandstats`` after ``CONFIG RESETSTAT`` (Redis and Valkey
count every ``redis.call`` inside a script there, plus the ``EVALSHA`` itself); round
trips are the writes fastlock's connections sent. Use a server nobody else is talking to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sync.client import Client

__all__ = ["Cost", "command_calls", "measure_cost"]

_BOOKKEEPING = frozenset({"info", "config|resetstat", "config"})


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
