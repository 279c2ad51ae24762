"""Gate an uncontended read-write lock lifecycle (acquire + release of one side) against
bench/budgets.toml [rwlock] (INFO commandstats, inner Lua commands included), both sides,
cores and servers; a wait on a free lock costs the same."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import fastlock
from fastlock.tools.costs import measure_cost

BUDGETS = tomllib.loads((Path(__file__).parents[2] / "bench" / "budgets.toml").read_text())["rwlock"]
CEILING = {"round_trips": 2}
"""The issue's target: an uncontended acquire and release in 2 round trips (one script call
each); budgets.toml may only go lower."""


def test_budgets_stay_under_the_ceiling() -> None:
    assert set(BUDGETS) == {"read", "write"}
    for side, budget in BUDGETS.items():
        assert budget["round_trips"] <= CEILING["round_trips"], side


@pytest.mark.parametrize("side", ["read", "write"])
@pytest.mark.parametrize("timeout", [0, 5], ids=["try", "wait"])
def test_lifecycle_cost(client: fastlock.Client, side: str, timeout: float) -> None:
    rw = client.rwlock(f"budget-{side}", ttl=30)
    lock = rw.read if side == "read" else rw.write

    def lifecycle() -> None:
        assert lock.acquire(timeout=timeout) is not None
        assert lock.release() is not None

    lifecycle()  # the scripts loaded, the eviction policy read
    cost = measure_cost(client, lifecycle, 30)
    budget = BUDGETS[side]
    assert cost.commands_per_op <= budget["commands"] + 1e-9, cost.by_command
    assert cost.round_trips_per_op <= budget["round_trips"] + 1e-9
    assert client.execute("KEYS", f"fl:{{budget-{side}}}:*") == [f"fl:{{budget-{side}}}:rwlock:seq".encode()]
