"""A manager's local queue (``locks/gate.py``), sans-IO on a fake clock: turns given in order,
``limit`` at a time, by bounded barging; ended by a leave, a lapse or a waiter giving up; a
queue that has not moved for a nap lets its first waiter go on; a fork's child starts clean."""

from __future__ import annotations

import os
from typing import Any

import pytest

from fastlock.locks.gate import RESERVE, SWEEP_AT, Gate
from fastlock.locks.notify import MAX_NAP, ThreadSignal
from fastlock.operations import Notice


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _gate(patience: float = 0.0) -> tuple[Gate, Clock]:
    clock = Clock()
    return Gate(ThreadSignal, patience, clock), clock


def _wait(gate: Gate, signal: Any, deadline: float) -> tuple[Any, Any]:
    """The wait operation started: it and its first step (a ``Notice``) or its result."""
    wait = gate.wait("k", signal, deadline)
    try:
        return wait, wait.send(None)
    except StopIteration as done:
        return None, done.value


def _resume(wait: Any) -> Any:
    try:
        return wait.send(None)
    except StopIteration as done:
        return done.value


def test_turns_go_first_come_first_served_limit_at_a_time() -> None:
    gate, clock = _gate()
    deadline = clock.now + 60
    assert gate.enter("k", "a", 2, deadline) is None
    assert gate.enter("k", "b", 2, deadline) is None
    assert gate.enter("k", "a", 2, deadline) is None  # a job that has a turn keeps it
    c, d = gate.enter("k", "c", 2, deadline), gate.enter("k", "d", 2, deadline)
    assert c is not None and d is not None and not c.is_set()
    wait_c, step = _wait(gate, c, deadline)
    assert type(step) is Notice and step.signal is c and step.timeout == MAX_NAP  # the first naps
    wait_d, step = _wait(gate, d, deadline)
    assert step.timeout == deadline - clock.now  # the others: until their deadline, or a turn ends
    gate.leave("k", "b")
    assert c.is_set() and not d.is_set()
    assert _resume(wait_c) is True
    gate.hold("k", "c", 2, clock.now + 30)
    assert gate.enter("k", "e", 2, deadline) is not None  # d waits before it
    gate.leave("k", "a")
    gate.leave("k", "c")
    assert d.is_set() and _resume(wait_d) is True
    assert set(gate.turns["k"].holders) == {"d", "e"}  # e got the second free turn
    gate.leave("k", "d")
    gate.leave("k", "e")
    assert gate.turns == {}


def test_a_waiter_that_gives_up_passes_its_turn_on() -> None:
    gate, clock = _gate()
    deadline = clock.now + 60
    assert gate.enter("k", "a", 1, deadline) is None
    b, c = gate.enter("k", "b", 1, deadline), gate.enter("k", "c", 1, deadline)
    wait_b, _ = _wait(gate, b, deadline)
    wait_c, _ = _wait(gate, c, deadline)
    wait_b.close()  # cancelled while waiting: c is next
    gate.leave("k", "a")
    assert c.is_set() and _resume(wait_c) is True
    d = gate.enter("k", "d", 1, deadline)
    wait_d, _ = _wait(gate, d, deadline)
    gate.leave("k", "c")
    assert d.is_set()
    wait_d.close()  # given the turn, cancelled before it used it: nobody holds it
    assert gate.turns == {}


def test_a_waiter_stops_at_its_deadline() -> None:
    gate, clock = _gate()
    assert gate.enter("k", "a", 1, clock.now + 60) is None
    deadline = clock.now + 0.05
    b = gate.enter("k", "b", 1, deadline)
    wait_b, step = _wait(gate, b, deadline)
    assert step.timeout == deadline - clock.now
    clock.now = deadline
    assert _resume(wait_b) is False
    assert list(gate.turns["k"].waiting) == [] and list(gate.turns["k"].holders) == ["a"]


def test_a_turn_lapses_at_its_end_without_a_release() -> None:
    """A holder that never releases (its lock expired, a task gone) holds its turn until its
    lease ends: the next waiter then gets it, woken at that time."""
    gate, clock = _gate()
    deadline = clock.now + 60
    assert gate.enter("k", "a", 1, deadline) is None
    gate.hold("k", "a", 1, clock.now + 0.5)
    b = gate.enter("k", "b", 1, deadline)
    wait_b, step = _wait(gate, b, deadline)
    assert step.timeout == pytest.approx(0.501)  # woken when a's turn ends
    clock.now += step.timeout
    assert _resume(wait_b) is True
    assert gate.turns["k"].holders == {"b": deadline + RESERVE}


def test_a_queue_that_has_not_moved_for_a_nap_lets_its_first_waiter_go_on() -> None:
    """The lock may have been released by another client, which no local turn sees: after
    MAX_NAP with no turn given or ended, the first waiter goes on to the server (a turn over
    the limit); the next one waits on."""
    gate, clock = _gate()
    deadline = clock.now + 60
    assert gate.enter("k", "a", 1, deadline) is None
    gate.hold("k", "a", 1, clock.now + 30)
    b, c = gate.enter("k", "b", 1, deadline), gate.enter("k", "c", 1, deadline)
    wait_b, step = _wait(gate, b, deadline)
    wait_c, _ = _wait(gate, c, deadline)
    clock.now += step.timeout
    assert _resume(wait_b) is True
    assert set(gate.turns["k"].holders) == {"a", "b"} and list(gate.turns["k"].waiting) == [c]
    step = wait_c.send(None)  # c is first now: its nap counts from b's turn
    assert step.timeout == MAX_NAP


def test_callers_barge_until_the_first_waiter_has_waited_its_patience() -> None:
    """The server's rule: a caller takes a free turn while the first waiter is young; a release
    tells that waiter once to try; once its patience is over the turn is handed to it and
    callers queue behind it."""
    gate, clock = _gate(patience=0.05)
    deadline = clock.now + 60
    assert gate.enter("k", "a", 1, deadline) is None
    b = gate.enter("k", "b", 1, deadline)
    wait_b, step = _wait(gate, b, deadline)
    assert step.timeout == pytest.approx(0.051)  # it re-checks when its patience ends
    gate.leave("k", "a")
    assert b.is_set()  # told to try ...
    assert gate.enter("k", "a", 1, deadline) is None  # ... and a running caller was faster
    b.wait(0)  # (the flag the release set, taken by the wait)
    step = wait_b.send(None)
    assert type(step) is Notice and list(gate.turns["k"].waiting) == [b]
    gate.leave("k", "a")
    assert not b.is_set()  # told once only
    assert gate.enter("k", "a", 1, deadline) is None
    clock.now += 0.06  # b's patience is over: nobody barges now, the release hands it the turn
    assert gate.enter("k", "c", 1, deadline) is not None
    gate.leave("k", "a")
    assert b.is_set() and _resume(wait_b) is True
    assert list(gate.turns["k"].holders) == ["b"]


def test_scopes_left_with_ended_turns_are_swept() -> None:
    gate, clock = _gate()
    for n in range(SWEEP_AT):
        assert gate.enter(f"k{n}", "a", 1, clock.now + 1) is None
        gate.hold(f"k{n}", "a", 1, clock.now + 1)  # taken, never released here
    assert len(gate.turns) == SWEEP_AT
    clock.now += 2
    assert gate.enter("new", "a", 1, clock.now + 1) is None
    assert list(gate.turns) == ["new"]


def test_a_forked_child_starts_with_no_turns() -> None:
    gate, clock = _gate()
    deadline = clock.now + 60
    assert gate.enter("k", "a", 1, deadline) is None
    assert gate.enter("k", "b", 1, deadline) is not None
    pid = os.fork()
    if pid == 0:  # the child: its parent's turns are not there to end
        os._exit(0 if gate.turns == {} and gate.enter("k", "c", 1, deadline) is None else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert set(gate.turns["k"].holders) == {"a"}
