"""The queue's call arguments and its operations of several calls, sans-IO: each operation
is driven by hand, step by step, with replies made up here (no server, no client)."""

from __future__ import annotations

from typing import Any

import pytest

import fastlock
from fastlock.operations import Call
from fastlock.queues.base import MAX_BATCH, QueueBase, enqueue_batches, extend_batches, recover_rounds
from fastlock.queues.jobs import Job, Member, Recovered


@pytest.fixture
def queue() -> QueueBase[None]:
    return QueueBase(None, "jobs", lease=2.0)


def jobs(count: int) -> list[Job]:
    members = [Member(token, 1, "", "", f"id-{token}") for token in range(1, count + 1)]
    return [Job(m.id, b"", m.attempt, m.token, m.encode()) for m in members]


def test_enqueue_batches_sends_one_call_per_batch(queue: QueueBase[None]) -> None:
    calls = queue._enqueue_many_calls([b"p"] * (MAX_BATCH + 5), None, 3)
    operation = enqueue_batches(queue.keys, calls)
    sizes = []
    step = operation.send(None)
    while True:
        assert isinstance(step, Call) and step.name == "queue_enqueue_many" and step.keys == queue.keys
        delay, level, *pairs = step.args
        assert (delay, level) == (0, "3") and pairs[1::2] == [b"p"] * (len(pairs) // 2)
        sizes.append(len(pairs) // 2)
        try:
            step = operation.send(len(pairs) // 2)
        except StopIteration as stop:
            ids = stop.value
            break
    assert sizes == [MAX_BATCH, 5]
    assert len(set(ids)) == MAX_BATCH + 5 and all(job_id.startswith("~") for job_id in ids)


def test_enqueue_batches_refuses_a_short_count(queue: QueueBase[None]) -> None:
    operation = enqueue_batches(queue.keys, queue._enqueue_many_calls([b"a", b"b"], None, None))
    operation.send(None)
    with pytest.raises(fastlock.ProtocolError):
        operation.send(1)


def test_extend_batches_names_the_lost_jobs_of_each_batch(queue: QueueBase[None]) -> None:
    held = jobs(MAX_BATCH + 2)
    operation = extend_batches(queue.keys, held, queue._extend_calls(held, None))
    first = operation.send(None)
    assert isinstance(first, Call) and first.args[0] == 2000 and len(first.args) == MAX_BATCH + 1
    assert first.args[1:] == [job.member for job in held[:MAX_BATCH]]
    second = operation.send([123, 2, MAX_BATCH])  # lost: the 2nd and the last of the first batch
    assert isinstance(second, Call) and second.args[1:] == [job.member for job in held[MAX_BATCH:]]
    with pytest.raises(StopIteration) as stop:
        operation.send([123, 1])
    lost: list[Job] = stop.value.value
    assert lost == [held[1], held[MAX_BATCH - 1], held[MAX_BATCH]]
    assert [job.lost for job in held].count(True) == 3


def test_an_error_thrown_into_an_operation_ends_it(queue: QueueBase[None]) -> None:
    held = jobs(2)
    operation = extend_batches(queue.keys, held, queue._extend_calls(held, 1.5))
    assert operation.send(None).args[0] == 1500  # type: ignore[union-attr]
    with pytest.raises(fastlock.ConnectionError):
        operation.throw(fastlock.ConnectionError("gone"))
    assert not any(job.lost for job in held)


@pytest.mark.parametrize(
    "build",
    [
        lambda q: q._extend_calls(jobs(1)[0], None),
        lambda q: q._extend_calls(["x"], None),
        lambda q: q._enqueue_many_calls(b"one", None, None),
        lambda q: q._enqueue_many_calls([1], None, None),
        lambda q: q._complete_args(jobs(MAX_BATCH + 1), 0, None),
        lambda q: q._interrupt_commands("fl:{other}:stop"),
    ],
)
def test_bad_arguments_are_refused_before_any_step(queue: QueueBase[None], build: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        build(queue)


def test_recover_rounds_calls_again_while_there_is_more(queue: QueueBase[None]) -> None:
    operation = recover_rounds(queue.keys, queue._recover_args(10, 3), 3)
    step = operation.send(None)
    assert isinstance(step, Call) and step.name == "queue_recover" and step.args == (10, queue.max_attempts)
    assert operation.send([8, 2, 1]) == step
    with pytest.raises(StopIteration) as stop:
        operation.send([1, 0, 0])
    assert stop.value.value == Recovered(9, 2, False)


def test_recover_rounds_stops_after_its_rounds(queue: QueueBase[None]) -> None:
    operation = recover_rounds(queue.keys, queue._recover_args(10, 2), 2)
    operation.send(None)
    operation.send([10, 0, 1])
    with pytest.raises(StopIteration) as stop:
        operation.send([5, 5, 1])
    assert stop.value.value == Recovered(15, 5, True)
