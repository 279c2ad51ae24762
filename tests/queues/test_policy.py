"""The worker's policy driven by hand, sans-IO: acts checked, results sent in, errors thrown in."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import fastlock
from fastlock.queues.calls import QueueBase
from fastlock.queues.jobs import Batch, Job, Member
from fastlock.queues.policy import MAX_RECOVER_CALLS, Act, Leases, WorkerBase


def job(n: int, attempt: int = 1) -> Job:
    return Job(f"j{n}", b"p", attempt, n, Member(n, attempt, "", "", f"j{n}").encode())


def batch(*jobs: Job) -> Batch:
    return Batch(jobs)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Worker(WorkerBase[QueueBase[Any]]):
    def __init__(self, clock: Clock, **options: Any) -> None:
        super().__init__(QueueBase(None, "q", lease=10.0), lambda job: None, clock=clock, **options)
        self._stopping = threading.Event()


def test_a_batch_completes_each_success_before_the_next_and_the_last_with_the_claim() -> None:
    worker = Worker(Clock(), batch=2)
    tally = worker._tally(3)
    plan = worker._looping(tally, Leases(), "k")
    first, second, third = job(1), job(2), job(3)
    assert next(plan) == Act("recover", (1000,), {"rounds": MAX_RECOVER_CALLS})
    assert plan.send(None) == Act("claim", (2,))
    assert plan.send(batch(first, second)) == Act("handle", (first,))
    assert plan.send(None) == Act("complete", ([first],), {"claim": 0})
    assert plan.send(Batch()) == Act("handle", (second,))
    assert plan.send(None) == Act("complete", ([second],), {"claim": 1})  # what the budget allows
    assert plan.send(batch(third)) == Act("handle", (third,))
    failure = KeyError("missing")
    fail = plan.throw(failure)
    assert fail.name == "fail" and fail.args[0] is third and fail.kwargs == {"retry_in": None, "dead": False}
    assert fail.args[1].startswith("KeyError: 'missing'\n\nTraceback (most recent call last):")
    assert plan.throw(fastlock.LeaseLost([third])) == Act("complete", ([],), {"claim": 0})
    with pytest.raises(StopIteration):
        plan.send(Batch())
    assert (tally.handled, tally.budget) == (3, 0)


def test_transient_errors_are_waited_out_and_the_budget_given_back() -> None:
    worker = Worker(Clock(), batch=1)
    tally = worker._tally(1)
    plan = worker._looping(tally, Leases(), "k")
    next(plan)  # recover
    assert plan.throw(fastlock.ConnectionError("down")) == Act("claim", (1,))  # warned, not raised
    pause = plan.throw(fastlock.ReadOnlyError("READONLY replica"))
    assert pause.name == "pause" and 0.05 <= pause.args[0] <= 0.25
    assert tally.budget == 1  # the failed claim gave its count back
    assert plan.send(None) == Act("claim", (1,))  # claimed again after the pause
    wait = plan.send(Batch())
    assert wait.name == "wait" and wait.kwargs == {"interrupt": "k"} and 0 < wait.args[0] <= 5.0
    with pytest.raises(fastlock.LuaCommandError):  # not transient: raised out of the plan
        plan.throw(fastlock.LuaCommandError("WRONGTYPE inside"))


def test_a_stopped_worker_claims_nothing_and_returns() -> None:
    worker = Worker(Clock())
    worker._stopping.set()
    with pytest.raises(StopIteration):
        next(worker._looping(worker._tally(None), Leases(), "k"))


def test_leases_are_due_every_third_of_a_lease_and_lost_ones_dropped() -> None:
    clock = Clock()
    leases = Leases(clock)
    queue = QueueBase(None, "q", lease=3.0)
    a, b = job(1), job(2)
    leases.hold(queue, [a, b])
    assert leases.due() == ([], pytest.approx(1.0))
    clock.now += 1.0
    due, wait = leases.due()
    assert due == [(queue, [a, b])] and wait == pytest.approx(1.0)
    leases.renewed(queue, [b])
    clock.now += 1.0
    assert leases.due()[0] == [(queue, [a])]
    leases.release(queue, [a])
    assert leases.due() == ([], None)
