"""A routed listener's waiters (a cluster node's, a sentinel master's), sans-IO: sharded
channels, a channel the server drops (the slot moved: ``sunsubscribe``) and a lost connection
forget their waiters, which are woken and enter again before their next attempt."""

from __future__ import annotations

import time
from typing import Any

import pytest

from fastlock.locks.notify import HandedSignal, WaiterTable
from fastlock.locks.waiting import WaitPlan, wait_for
from fastlock.operations import Call, Listen, Notice
from fastlock.sync.notify import ThreadSignal

FIRST = Call("lock_acquire", ("idx", "seq", "log", "w", "slot"), ("job", "d", 0, 7, 0))
AGAIN = Call("lock_acquire", ("idx", "seq", "log", "w", "slot"), ("job", "d", 0, 31, 0))
CHANNEL = b"fastlock:{7}:d:w@0"


class Flag(HandedSignal):
    __slots__ = ("flag",)

    def __init__(self, job: str = "") -> None:
        super().__init__(job)
        self.flag = False

    def set(self) -> None:
        self.flag = True

    def is_set(self) -> bool:
        return self.flag


def test_a_shard_table_speaks_sharded_pubsub() -> None:
    table: WaiterTable[Flag] = WaiterTable(shard=True)
    first, second = Flag("s1:a"), Flag("s2:b")
    assert table.add(CHANNEL, first) == ("SSUBSCRIBE", CHANNEL)
    assert table.add(CHANNEL, second) is None
    assert table.on_reply([b"ssubscribe", CHANNEL, 1]) == (True, CHANNEL)
    assert table.on_reply([b"smessage", CHANNEL, b"9:s2:b"]) is None
    assert (first.flag, second.flag, second.token) == (False, True, 9)
    assert table.remove(CHANNEL, first) is None
    assert table.remove(CHANNEL, second) == ("SUNSUBSCRIBE", CHANNEL)
    assert table.on_reply([b"sunsubscribe", CHANNEL, 0]) is None  # the reply to ours


def test_a_channel_the_server_drops_forgets_its_waiters() -> None:
    """A ``sunsubscribe`` that answers none of ours (the slot moved away, the node was demoted):
    the channel's waiters are marked lost and woken; the other channels' are untouched."""
    table: WaiterTable[Flag] = WaiterTable(shard=True)
    moved, other = Flag("s1:a"), Flag("s2:b")
    table.add(CHANNEL, moved)
    table.add(b"fastlock:{8}:e:w@0", other)
    assert table.on_reply([b"sunsubscribe", CHANNEL, 1]) == (False, CHANNEL)
    assert (moved.lost, moved.flag, other.lost, other.flag) == (True, True, False, False)
    assert table.channels() == [b"fastlock:{8}:e:w@0"]
    assert table.add(CHANNEL, Flag("s3:c")) == ("SSUBSCRIBE", CHANNEL)  # entered again: subscribed again


def test_an_unsubscribe_of_ours_pending_is_not_taken_for_the_servers() -> None:
    table: WaiterTable[Flag] = WaiterTable(shard=True)
    left = Flag("s1:a")
    table.add(CHANNEL, left)
    assert table.remove(CHANNEL, left) == ("SUNSUBSCRIBE", CHANNEL)
    back = Flag("s2:b")
    assert table.add(CHANNEL, back) == ("SSUBSCRIBE", CHANNEL)
    assert table.on_reply([b"sunsubscribe", CHANNEL, 0]) is None  # ours: the new waiter stays
    assert table.on_reply([b"ssubscribe", CHANNEL, 1]) == (True, CHANNEL)
    assert not back.lost and table.has(CHANNEL)


def test_a_lost_connection_of_a_routed_listener_forgets_every_waiter() -> None:
    table: WaiterTable[Flag] = WaiterTable(shard=True)
    waiters = [Flag(f"s{n}:j{n}") for n in range(3)]
    for n, waiter in enumerate(waiters):
        table.add(f"c{n % 2}".encode(), waiter)
    table.remove(b"c1", waiters[1])  # an unsubscribe pending: its reply will never come
    table.forget_all()
    assert all(w.lost and w.flag for w in (waiters[0], waiters[2])) and table.channels() == []
    assert table.on_reply([b"sunsubscribe", b"c1", 0]) == (False, b"c1")  # a new connection's: the server's


class Listener:
    """A fake routed listener: records what the operation asks of it."""

    db = 0
    wait_mark = "s"

    def __init__(self) -> None:
        self.left: list[Any] = []

    def channel(self, wake: str) -> bytes:
        return f"{wake}@0".encode()

    def join(self, channel: bytes, job: str) -> None:
        return None

    def leave(self, channel: bytes, signal: Any) -> None:
        self.left.append(signal)

    def abandon(self, call: Call) -> None:
        raise AssertionError("nothing to abandon")


def test_a_lost_waiter_follows_the_topology_then_enters_again_before_its_next_attempt() -> None:
    listener = Listener()
    operation = wait_for(WaitPlan(FIRST, AGAIN, "w", job="s1:job"), 10.0, listener)
    assert next(operation) is FIRST
    assert operation.send([-1, b"other"]) == Listen(listener, b"w@0", "s1:job")
    signal = Flag("s1:job")
    assert operation.send(signal) is AGAIN
    assert operation.send([-1, b"other"]) == Notice(signal, 1.0)
    signal.lost = True  # the slot moved: woken, without a token
    assert operation.send(None) is AGAIN  # the client follows the move (MOVED)
    assert operation.send([-1, b"other"]) == Listen(listener, b"w@0", "s1:job")  # where it is now
    assert listener.left == [signal]
    fresh = Flag("s1:job")
    assert operation.send(fresh) is AGAIN
    assert operation.send([-1, b"other"]) == Notice(fresh, 1.0)
    assert operation.send(None) is AGAIN  # an ordinary re-check: not entered again
    with pytest.raises(StopIteration) as stop:
        operation.send(5)
    assert stop.value.value == 5 and listener.left == [signal, fresh]


def test_a_loss_in_a_re_check_enters_again_at_once_and_a_second_in_a_row_naps() -> None:
    """A subscription lost while the waiter re-checks (not asleep: nothing woke it) is found
    before its next wait: it enters again without one; lost again before it has slept, it
    naps first (:func:`test_a_signal_lost_before_its_wait_sleeps_its_nap`), so a topology in
    flux is not polled; once it has slept entered, a later loss is hurried again."""
    listener = Listener()
    operation = wait_for(WaitPlan(FIRST, AGAIN, "w", job="s1:job"), 10.0, listener)
    next(operation)
    operation.send([-1, b"other"])
    signal = Flag("s1:job")
    assert operation.send(signal) is AGAIN
    signal.lost = True  # the slot moved during that re-check
    assert operation.send([-1, b"other"]) is AGAIN  # no Notice: it follows the move at once
    assert operation.send([-1, b"other"]) == Listen(listener, b"w@0", "s1:job")
    again = Flag("s1:job")
    assert operation.send(again) is AGAIN
    again.lost = True  # lost again before it slept
    assert operation.send([-1, b"other"]) == Notice(again, 1.0)
    assert operation.send(None) is AGAIN
    assert operation.send([-1, b"other"]) == Listen(listener, b"w@0", "s1:job")
    settled = Flag("s1:job")
    assert operation.send(settled) is AGAIN
    assert operation.send([-1, b"other"]) == Notice(settled, 1.0)  # entered: it sleeps
    assert operation.send(None) is AGAIN
    settled.lost = True  # a loss after a sleep entered: hurried again
    assert operation.send([-1, b"other"]) is AGAIN
    assert operation.send([-1, b"other"]) == Listen(listener, b"w@0", "s1:job")
    handed = Flag("s1:job")
    assert operation.send(handed) is AGAIN
    handed.lost, handed.token = True, 9  # handed the lock, then lost: the token is taken
    assert operation.send([-1, b"other"]) == Notice(handed, 1.0)
    with pytest.raises(StopIteration) as stop:
        operation.send(9)
    assert stop.value.value == 9


def test_a_signal_lost_before_its_wait_sleeps_its_nap() -> None:
    """No wake-up will come to a signal whose subscription is already gone (the node is
    unreachable, the map stale): its wait lasts the whole nap, so a waiter never spins."""
    signal = ThreadSignal("s1:job")
    signal.lost = True
    signal.set()
    started = time.monotonic()
    assert signal.wait(0.05) is None
    assert time.monotonic() - started >= 0.05
    handed = ThreadSignal("s2:job")
    handed.lost = True
    handed.token = 7  # handed the lock before the loss: told at once
    handed.set()
    assert handed.wait(5.0) == 7
