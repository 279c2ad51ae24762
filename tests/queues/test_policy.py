"""The worker's policy driven by hand, sans-IO: acts checked, results sent in, errors thrown in."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import fastlock
import fastlock.queues.outcomes
import fastlock.queues.policy
from fastlock.queues.base import QueueBase
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
    _queue_type = QueueBase
    _flag_type = threading.Event

    def __init__(self, clock: Clock, **options: Any) -> None:
        super().__init__(QueueBase(None, "q", lease=10.0), lambda job: None, clock=clock, **options)


def test_stopping_sets_the_flag_then_wakes_every_loop_past_a_failed_interrupt() -> None:
    worker = Worker(Clock(), concurrency=2)
    first, second = worker._interrupts
    plan = worker._waking()
    assert next(plan) == Act("interrupt", (first,)) and worker._stopping.is_set()
    assert plan.throw(fastlock.ConnectionError("down")) == Act("interrupt", (second,))
    with pytest.raises(StopIteration):
        plan.send(None)


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


def test_a_stopping_worker_finishes_its_job_and_hands_the_rest_back() -> None:
    worker = Worker(Clock(), batch=3)
    tally = worker._tally(None)
    leases = Leases()
    plan = worker._looping(tally, leases, "k")
    a, b, c = job(1), job(2), job(3)
    next(plan)  # recover
    assert plan.send(None) == Act("claim", (3,))
    assert plan.send(batch(a, b, c)) == Act("handle", (a,))
    worker._stopping.set()  # a signal arrives while the first job runs
    assert plan.send(None) == Act("complete", ([a],), {"claim": 0})
    assert plan.send(Batch()) == Act("release", ([b, c],))  # at once, attempts unspent
    assert plan.send([]) == Act("complete", ([],), {"claim": 0})  # claims nothing more
    with pytest.raises(StopIteration):
        plan.send(Batch())
    assert tally.handled == 1 and leases.due() == ([], None)


def test_burst_returns_once_nothing_is_ready_nor_due_soon() -> None:
    worker = Worker(Clock(), burst=True, idle_wait=1.0)
    plan = worker._looping(worker._tally(None), Leases(), "k")
    next(plan)
    assert plan.send(None) == Act("claim", (10,))
    soon = Batch()
    soon.next_due_in = 0.5  # a retry due within idle_wait: waited for
    assert plan.send(soon).name == "wait"
    assert plan.send(False) == Act("claim", (10,))
    later = Batch()
    later.next_due_in = 60.0
    with pytest.raises(StopIteration):
        plan.send(later)


def test_retry_dead_letter_timeout_and_hooks() -> None:
    calls: list[str] = []

    def before(j: Job) -> None:
        calls.append("before")

    def after(j: Job) -> None:
        calls.append("after")

    worker = Worker(Clock(), batch=4, job_timeout=2.5, before=before, after=after)
    worker.on_retry = lambda j, exc: None
    worker.on_failure = lambda j, exc: None
    leases = Leases()
    plan = worker._looping(worker._tally(4), leases, "k")
    jobs = [job(n) for n in range(1, 5)]
    next(plan)
    assert plan.send(None) == Act("claim", (4,))
    assert plan.send(batch(*jobs)) == Act("call", (before, jobs[0]))
    assert plan.send(None) == Act("handle", (jobs[0],), {"timeout": 2.5})
    retry = fastlock.queues.outcomes.Retry("later", in_=7)
    fail = plan.throw(retry)
    assert fail.name == "fail" and fail.kwargs == {"retry_in": 7.0, "dead": False}
    assert plan.send(True) == Act("call", (worker.on_retry, jobs[0], retry))  # retried: on_retry
    assert plan.send(None) == Act("call", (before, jobs[1]))
    plan.send(None)
    dead = fastlock.queues.outcomes.DeadLetter("bad input")
    assert plan.throw(dead) == Act("fail", (jobs[1], "bad input"), {"retry_in": None, "dead": True})
    assert plan.send(False) == Act("call", (worker.on_failure, jobs[1], dead))  # dead: on_failure
    assert plan.send(None) == Act("call", (before, jobs[2]))
    plan.send(None)
    timeout = fastlock.queues.outcomes.JobTimeout("past 2.5 s")
    fail = plan.throw(timeout)
    assert fail.name == "fail" and fail.args[1].startswith("JobTimeout: past 2.5 s")
    assert jobs[3].member in {j.member for _, js in _held(leases) for j in js}
    assert jobs[2].member not in {j.member for _, js in _held(leases) for j in js}  # not renewed
    assert plan.send(True).name == "call" and jobs[2].lost  # the abandoned handler can tell
    assert plan.send(None) == Act("call", (before, jobs[3]))
    assert plan.throw(KeyError("hook")).name == "fail"  # a failing before fails the job
    plan.send(True)  # on_retry
    assert plan.send(None) == Act("complete", ([],), {"claim": 0})
    with pytest.raises(StopIteration):
        plan.send(Batch())


def test_a_failing_after_hook_is_logged_and_the_job_still_completed() -> None:
    def after(j: Job) -> None:
        pass

    worker = Worker(Clock(), batch=1, after=after)
    plan = worker._looping(worker._tally(1), Leases(), "k")
    a = job(1)
    next(plan)
    plan.send(None)
    assert plan.send(batch(a)) == Act("handle", (a,))
    assert plan.send(None) == Act("call", (after, a))
    assert plan.throw(RuntimeError("hook bug")) == Act("complete", ([a],), {"claim": 0})


def _held(leases: Leases) -> list[tuple[Any, list[Job]]]:
    return [(queue, list(jobs.values())) for queue, jobs in leases._held.items()]


def test_outage_warnings_are_rate_limited_with_one_recovered_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the next recovery is jittered to 0.5-1.5 half leases (2.5-7.5 s here): pin it past the 3 s outage
    monkeypatch.setattr(fastlock.queues.policy.random, "uniform", lambda low, high: high)
    clock = Clock()
    worker = Worker(clock, batch=1)
    plan = worker._looping(worker._tally(None), Leases(), "k")
    next(plan)
    caplog.set_level("WARNING", "fastlock.worker")
    act = plan.send(None)
    for _ in range(30):  # 3 s of refused claims and their pauses
        assert act == Act("claim", (1,))
        assert plan.throw(fastlock.ConnectionError("refused")).name == "pause"
        clock.now += 0.1
        act = plan.send(None)
    plan.send(batch(job(1)))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "refused" in lines[0], lines
    assert lines[1].endswith("server back, recovered after 3.0 s")


def test_worker_options_are_checked() -> None:
    for bad in ({"concurrency": 0}, {"job_timeout": -1}, {"job_timeout": float("nan")}):
        with pytest.raises(ValueError):
            Worker(Clock(), **bad)
    for wrong in ({"burst": 1}, {"before": 3}, {"on_failure": "x"}, {"concurrency": 1.5}):
        with pytest.raises(TypeError):
            Worker(Clock(), **wrong)
    with pytest.raises(ValueError):
        fastlock.queues.outcomes.Retry(in_=-1)
