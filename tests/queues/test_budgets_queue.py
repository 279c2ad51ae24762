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


def test_schedule_tick_cost(client: fastlock.Client) -> None:
    """A scheduler in steady state at a 10 ms period: per tick a sleep and one
    ``queue_schedule`` call (enqueue, move the due time, read the next)."""
    queue = client.queue("budget-ticks")
    queue.every(0.01, b"tick", name="often", catch_up="all")
    rounds = iter(range(81))  # 40 times a sleep and a tick
    cost = measure_cost(client, lambda: queue.run_schedules(stop=lambda: next(rounds) == 80), 1)
    ticks = queue.stats().ready
    budget = BUDGETS["schedule_tick"]
    assert within(cost.commands_per_op / ticks, budget["commands"]), (ticks, cost.by_command)
    assert within(cost.round_trips_per_op / ticks, budget["round_trips"]), (ticks, cost.round_trips_per_op)


@pytest.mark.parametrize("path", ["replace", "extend"])
def test_debounce_cost(client: fastlock.Client, path: str) -> None:
    """A unique job waiting in the delayed set, enqueued again with ``on_duplicate=path``."""
    queue = client.queue("budget")
    first = queue.enqueue(b"job", unique="debounced", delay=60)
    delays = iter(range(61, 10_000))  # each extend pushes the due time further back

    def again() -> None:
        assert queue.enqueue(b"job", unique="debounced", delay=next(delays), on_duplicate=path) == first

    again()
    cost = measure_cost(client, again, 20)
    budget = BUDGETS[path]
    assert within(cost.commands_per_op, budget["commands"]), cost.by_command
    assert within(cost.round_trips_per_op, budget["round_trips"])


def test_progress_cost(client: fastlock.Client) -> None:
    queue = client.queue("budget")
    queue.enqueue(b"job")
    [job] = queue.claim()
    queue.progress(job, {"done": 0})
    cost = measure_cost(client, lambda: queue.progress(job, {"done": 1, "of": 2}), 20)
    budget = BUDGETS["progress"]
    assert within(cost.commands_per_op, budget["commands"]), cost.by_command
    assert within(cost.round_trips_per_op, budget["round_trips"])


def test_holds_and_cancel_running_costs(client: fastlock.Client) -> None:
    """``holds`` (the heartbeat's extend of one lease) as before the cancel of running jobs,
    and that cancel of one of a few running jobs."""
    queue = client.queue("budget")
    queue.enqueue_many([b"job"] * 22)
    held = queue.claim(22)
    assert queue.holds(held[0])
    cost = measure_cost(client, lambda: queue.holds(held[0]), 20)
    assert within(cost.commands_per_op, BUDGETS["holds"]["commands"]), cost.by_command
    assert within(cost.round_trips_per_op, BUDGETS["holds"]["round_trips"])
    running = iter(held[1:])
    assert queue.cancel(next(running).id).done
    cost = measure_cost(client, lambda: queue.cancel(next(running).id), 20)
    budget = BUDGETS["cancel_active"]
    assert within(cost.commands_per_op, budget["commands"]), cost.by_command
    assert within(cost.round_trips_per_op, budget["round_trips"])
