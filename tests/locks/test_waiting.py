"""The lock operations driven by hand, sans-IO: each test sends replies (or throws errors) into
an operation and checks the steps it yields, with a fake clock; no server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fastlock.exceptions import ConnectionError, ProtocolError
from fastlock.locks import types
from fastlock.locks.waiting import MAX_BLOCK, WaitPlan, attempt, wait_for
from fastlock.operations import Blocking, Call, Operation

FIRST = Call("lock_acquire", ("idx", "seq", "log", "w", "slot"), ("job", "d", 0, 7, 0))
AGAIN = Call("lock_acquire", ("idx", "seq", "log", "w", "slot"), ("job", "d", 0, 15, 0))
PLAN = WaitPlan(FIRST, AGAIN, "w")
LUA = Path(__file__).resolve().parents[2] / "lua"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def finish(operation: Operation[Any], reply: object) -> object:
    """Send the last reply; the operation's return value."""
    with pytest.raises(StopIteration) as stop:
        operation.send(reply)
    return stop.value.value


def test_taken_at_once_yields_no_wait() -> None:
    operation = wait_for(PLAN, 5.0, clock=Clock())
    assert next(operation) is FIRST
    assert finish(operation, 42) == 42


def test_waits_on_the_wake_list_until_the_holders_expire_then_tries_again() -> None:
    clock = Clock()
    operation = wait_for(PLAN, 5.0, clock=clock)
    assert next(operation) is FIRST
    assert operation.send([250, b"other"]) == Blocking(("BLPOP", "w", 0.252), 0.252)  # expiry + 2 ms
    clock.now += 0.252
    assert operation.send(None) is AGAIN  # BLPOP timed out: retry with the waited flag
    assert finish(operation, 9) == 9


def test_a_wait_never_outlasts_the_deadline_nor_the_safety_net() -> None:
    clock = Clock()
    operation = wait_for(PLAN, 100.0, clock=clock)
    next(operation)
    assert operation.send([-1, b"other"]) == Blocking(("BLPOP", "w", MAX_BLOCK), MAX_BLOCK)  # no expiry
    clock.now += 99.9996
    assert operation.send([b"w", b"1"]) is AGAIN  # woken
    step = operation.send([-1, b"other"])
    assert step == Blocking(("BLPOP", "w", 0.001), 0.001)  # what is left, rounded up: never 0 (for ever)


def test_gives_the_last_conflict_back_at_the_deadline() -> None:
    clock = Clock()
    operation = wait_for(PLAN, 1.0, clock=clock)
    next(operation)
    assert operation.send([5000, b"other"]) == Blocking(("BLPOP", "w", 1.0), 1.0)
    clock.now += 1.0
    assert operation.send(None) is AGAIN
    assert finish(operation, [4000, b"other", b"third"]) == [4000, b"other", b"third"]


def test_an_acquire_whose_reply_was_lost_is_sent_once_more() -> None:
    operation = attempt(FIRST)
    assert next(operation) is FIRST
    assert operation.throw(ConnectionError("reset", sent=True)) is FIRST
    assert finish(operation, 3) == 3
    operation = attempt(FIRST)
    next(operation)
    operation.throw(ConnectionError("reset", sent=True))
    with pytest.raises(ConnectionError):  # lost twice: the error goes to the caller
        operation.throw(ConnectionError("reset again", sent=True))


def test_an_unsent_acquire_is_not_sent_again() -> None:
    operation = wait_for(PLAN, 5.0, clock=Clock())
    next(operation)
    with pytest.raises(ConnectionError, match="refused"):
        operation.throw(ConnectionError("refused", sent=False))


@pytest.mark.parametrize("reply", [0, -1, b"OK", [], [b"x"], [10, 5]])
def test_an_unexpected_acquire_reply_is_a_protocol_error(reply: object) -> None:
    operation = wait_for(PLAN, 5.0, clock=Clock())
    next(operation)
    with pytest.raises(ProtocolError, match="lock_acquire"):
        operation.send(reply)


def test_the_flag_bits_have_one_definition_the_lua_one() -> None:
    """Python reads the bits from shared/_lock_flags.lua; no other Lua file defines them."""
    defining = [
        path.relative_to(LUA).as_posix()
        for path in LUA.rglob("*.lua")
        if re.search(r"^local [A-Z_, ]*\bTRACK\b.*=", path.read_text(), re.MULTILINE)
    ]
    assert defining == ["shared/_lock_flags.lua"]
    assert (types.TRACK, types.FENCING, types.WAITING, types.WAITED) == (1, 2, 4, 8)
