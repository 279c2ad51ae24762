"""Gate a limiter decision's server commands and round trips against bench/budgets.toml
(INFO commandstats, inner Lua commands included), both kinds, cores and servers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import fastlock
from fastlock.tools.costs import measure_cost

BUDGETS = tomllib.loads((Path(__file__).parents[2] / "bench" / "budgets.toml").read_text())["limiter"]
CEILING = {"commands": 1 + 3, "round_trips": 1}
"""The issue's target for one decision (the EVALSHA and at most 3 commands inside); budgets.toml
may only go lower."""


def test_budgets_stay_under_the_ceiling() -> None:
    for kind, budget in BUDGETS.items():
        for metric, limit in CEILING.items():
            assert budget[metric] <= limit, (kind, metric)


@pytest.mark.parametrize("kind", ["gcra", "window"])
@pytest.mark.parametrize("admitted", [True, False], ids=["admitted", "denied"])
def test_decision_cost(client: fastlock.Client, kind: str, admitted: bool) -> None:
    limiter = client.limiter(f"budget-{kind}", rate=10_000 if admitted else 1, per=100.0, kind=kind)  # type: ignore[arg-type]
    assert limiter.try_acquire().allowed  # the script loaded
    cost = measure_cost(client, limiter.try_acquire, 50)
    budget = BUDGETS[kind]
    assert cost.commands_per_op <= budget["commands"] + 1e-9, cost.by_command
    assert cost.round_trips_per_op <= budget["round_trips"] + 1e-9
    assert limiter.try_acquire().allowed is admitted
