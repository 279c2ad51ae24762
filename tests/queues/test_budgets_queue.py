"""Gate the queue's per-job server commands and round trips against bench/budgets.toml
(deterministic counts: INFO commandstats, inner Lua commands included), both cores and servers."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import fastlock
from fastlock.tools.costs import measure_cost

BUDGETS = tomllib.loads((Path(__file__).parents[2] / "bench" / "budgets.toml").read_text())["queue"]
BATCH = {"unbatched": 1, "batched_10": 10, "batched_100": 100}
# Hard ceilings per job (recover_idle: per call) behind README's figures; budgets.toml may only go lower.
CEILINGS = {
    "unbatched": {"commands": 17, "round_trips": 2},
    "batched_100": {"commands": 1, "round_trips": 0.02},
    "recover_idle": {"commands": 3, "round_trips": 1},
}


def within(measured: float, budget: float) -> bool:
    return measured <= budget + 1e-9


def test_budgets_stay_under_the_hard_ceilings() -> None:
    for path, ceiling in CEILINGS.items():
        for metric, limit in ceiling.items():
            assert within(BUDGETS[path][metric], limit), (path, metric)


@pytest.mark.parametrize("path", BATCH)
def test_steady_state_cost_per_job(client: fastlock.Client, path: str) -> None:
    """One producer and one worker: enqueue n, then complete the n held jobs and claim n."""
    n = BATCH[path]
    queue = client.queue("budget")
    payloads = [b"job"] * n
    queue.enqueue_many(payloads)
    held = queue.claim(n)

    def lifecycle() -> None:
        nonlocal held
        if n == 1:
            queue.enqueue(b"job")
        else:
            queue.enqueue_many(payloads)
        held = queue.complete(held, claim=n)
        assert len(held) == n

    lifecycle()  # scripts loaded, steady state reached
    cost = measure_cost(client, lifecycle, 50)
    commands, round_trips = cost.commands_per_op / n, cost.round_trips_per_op / n
    budget = BUDGETS[path]
    assert within(commands, budget["commands"]), (commands, cost.by_command)
    assert within(round_trips, budget["round_trips"]), round_trips


def test_idle_recover_cost(client: fastlock.Client) -> None:
    queue = client.queue("budget")
    queue.enqueue_many([b"job"] * 10)
    queue.claim(10)  # live leases: nothing to recover
    queue.recover()
    cost = measure_cost(client, queue.recover, 20)
    budget = BUDGETS["recover_idle"]
    assert within(cost.commands_per_op, budget["commands"]), cost.by_command
    assert within(cost.round_trips_per_op, budget["round_trips"])
