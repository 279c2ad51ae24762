"""Gate every lock type's commands and round trips per lifecycle against bench/budgets.toml
(deterministic counts: INFO commandstats, inner Lua commands included), both cores and servers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import fastlock
from fastlock.testing.costs import lifecycle, measure_lifecycles

BUDGETS = tomllib.loads((Path(__file__).parents[2] / "bench" / "budgets.toml").read_text())["lock"]
OPERATIONS = 30


def within(measured: float, budget: float) -> bool:
    return measured <= budget + 1e-9


def test_budgets_stay_under_the_hard_ceilings() -> None:
    """until_executed in at most 8 server commands (README), 2 round trips for every type with
    two transitions (3 for a type with both scopes: until_and_while_executing); the budget file
    may only go lower."""
    assert within(BUDGETS["until_executed"]["commands"], 8)
    for kind in fastlock.LockType:
        limit = 3 if kind.spec.both else 2  # both scopes: the hand-off is one more
        assert within(BUDGETS[kind.value]["round_trips"], limit), kind


@pytest.mark.parametrize("changelog", [False, True], ids=["changelog-off", "changelog-on"])
def test_lifecycle_costs_within_budget(client: fastlock.Client, changelog: bool) -> None:
    costs = measure_lifecycles(client, max_history=1000 if changelog else 0, operations=OPERATIONS)
    assert set(costs) == set(fastlock.LockType) and {kind.value for kind in costs} == set(BUDGETS)
    over = []
    for kind, cost in costs.items():
        budget = BUDGETS[kind.value]
        commands = budget["changelog_commands"] if changelog else budget["commands"]
        if not within(cost.commands_per_op, commands) or not within(
            cost.round_trips_per_op, budget["round_trips"]
        ):
            over.append(
                f"{kind.value}: {cost.commands_per_op} commands, {cost.round_trips_per_op} round trips"
            )
    assert over == []


def test_until_executed_leaves_no_per_lock_key(client: fastlock.Client) -> None:
    run = lifecycle(fastlock.LockManager(client, buckets=4), fastlock.LockType.UNTIL_EXECUTED)
    for _ in range(OPERATIONS):
        run()
    assert {key.rsplit(b":", 1)[1] for key in client.execute("KEYS", "*")} == {b"seq"}  # shared per bucket
