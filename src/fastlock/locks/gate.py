"""A client's local queue in front of each lock it waits for (sans-IO, shared by the sync and
asyncio shells).

Waiters of one manager (one client: a process's threads, a loop's tasks) on one lock scope
take turns here before they contend at the server: at most ``limit`` of them (the lock's
holders) go on to the server at a time, the others wait in-process, and a release of this
manager lets the next one in, which then takes the lock with an uncontended acquire. The
server sees one contender per client and name instead of every waiter: no queue bookkeeping,
no notification, no attempt that fails.

The rule is the server's (``docs/locks.md``, "Hand-over and fairness"): bounded barging. A
caller that finds a turn free takes it unless the longest-waiting waiter has waited
``patience``; a release tells that waiter once to try (a running caller may be faster), and
once its patience is over gives the turn to it directly, so waiters are served in their order
and none waits behind barging callers longer than its patience. ``patience=0`` (``fair``):
first come, first served.

A turn is advisory, never a condition of correctness (the server decides who holds the lock):
each one lasts until its holder releases, or its lease ends (the lock's ttl from the acquire;
the waiter's deadline and :data:`RESERVE` while it is still acquiring), whichever comes first,
so a holder that never releases (expired, a task gone) delays the next local waiter by its
ttl at most, as the server would; and when no turn has moved for
:data:`~fastlock.locks.notify.MAX_NAP`, the first waiter goes on to the server all the same
(the lock may have been released by another client, which no local turn sees).
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..operations import Notice, Operation
from .notify import MAX_NAP

__all__ = ["RESERVE", "SWEEP_AT", "Gate"]

RESERVE = 1.0  # how long past its deadline a waiter's turn lasts while it is still acquiring
SWEEP_AT = 1024  # scopes with turns kept before ended ones are swept


class _Waiting:
    """A queued waiter: its ``deadline``, ``since`` when it waits (``time.monotonic``), and
    whether a release has ``told`` it to try."""

    __slots__ = ("deadline", "since", "told")

    def __init__(self, deadline: float, since: float) -> None:
        self.deadline, self.since, self.told = deadline, since, False


class _Turns:
    """One scope's turns: ``limit`` at a time, the ``holders`` (job id -> end of turn,
    ``time.monotonic``) and the ``waiting`` signals, in order of arrival."""

    __slots__ = ("holders", "limit", "moved", "waiting")

    def __init__(self, limit: int, now: float) -> None:
        self.limit = limit
        self.holders: dict[str, float] = {}
        self.waiting: dict[Any, _Waiting] = {}
        self.moved = now
        """When a turn was last given or ended by a release."""

    def room(self) -> bool:
        return len(self.holders) < self.limit

    def take(self, signal: Any, now: float) -> None:
        """Give the turn to queued ``signal``'s waiter."""
        self.holders[signal.job] = self.waiting.pop(signal).deadline + RESERVE
        self.moved = now


class Gate:
    """The turns of one lock manager's waiters, by scope name, with the manager's ``patience``
    (seconds), on ``clock`` (the waiters' deadlines and the turns' ends are its readings).
    ``signal(job)`` makes a waiter's wake-up signal (the shell's: ``AsyncSignal``,
    ``ThreadSignal``). Its methods are safe from any thread; a forked child starts with no
    turns (its parent's threads are not there to end them)."""

    __slots__ = ("__weakref__", "_clock", "_lock", "_signal", "_sweep_at", "patience", "turns")

    def __init__(
        self, signal: Callable[[str], Any], patience: float = 0.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._signal = signal
        self._clock = clock
        self.patience = patience
        self._lock = threading.Lock()
        self.turns: dict[str, _Turns] = {}
        self._sweep_at = SWEEP_AT
        _GATES.add(self)

    def enter(self, key: str, job: str, limit: int, deadline: float) -> Any:
        """Ask for ``job``'s turn on scope ``key`` (``limit`` at a time) before ``deadline``:
        ``None`` when it has it now (a job that has one keeps it), else the signal it waits on
        (:meth:`wait`)."""
        with self._lock:
            turns = self.turns.get(key)
            if turns is None:
                if len(self.turns) >= self._sweep_at:
                    self._sweep()
                turns = self.turns[key] = _Turns(limit, self._clock())
            holders = turns.holders
            if job not in holders:
                now = self._clock()
                _expire(holders, now)
                if not turns.room() or self._owed(turns, now):
                    signal = self._signal(job)
                    turns.waiting[signal] = _Waiting(deadline, now)
                    return signal
            holders[job] = max(holders.get(job, 0.0), deadline + RESERVE)
            return None

    def wait(self, key: str, signal: Any, deadline: float) -> Operation[bool]:
        """Wait for ``signal``'s turn on ``key`` until ``deadline``: True once it has it; False
        at the deadline, or if the wait fails or is cancelled (the turn then goes on)."""
        done = False
        try:
            while True:
                with self._lock:
                    turns = self.turns[key]
                    if signal not in turns.waiting:
                        done = True
                        return True
                    now = self._clock()
                    if now >= deadline:
                        return False
                    _expire(turns.holders, now)  # turns that ended without a release
                    first = next(iter(turns.waiting))
                    if first is signal and (turns.room() or now - turns.moved >= MAX_NAP):
                        turns.take(signal, now)  # (over the limit if no turn moved for a nap)
                        self._serve(turns, now)  # (a limit's other free turns)
                        done = True
                        return True
                    until = min(deadline, min(turns.holders.values(), default=math.inf) + 0.001)
                    if first is signal:  # no caller barges once its patience is over
                        patient_until = turns.waiting[signal].since + self.patience
                        if now < patient_until:
                            until = min(until, patient_until + 0.001)
                        until = min(until, turns.moved + MAX_NAP)
                yield Notice(signal, max(until - now, 0.0))
        finally:
            if not done:
                self.leave(key, signal.job, signal)

    def hold(self, key: str, job: str, limit: int, until: float) -> None:
        """``job`` took the lock on ``key`` (``limit`` holders): its turn lasts until ``until``
        (``time.monotonic``), whether it waited its turn or not."""
        with self._lock:
            turns = self.turns.get(key)
            if turns is None:
                turns = self.turns[key] = _Turns(limit, self._clock())
            turns.holders[job] = until

    def leave(self, key: str, job: str, signal: Any = None) -> None:
        """``job``'s turn on ``key`` ends (a release, a failed acquire; with ``signal``, a
        waiter that gave up, turn or not): the next waiters are served."""
        with self._lock:
            turns = self.turns.get(key)
            if turns is None:
                return
            now = self._clock()
            if (signal is None or turns.waiting.pop(signal, None) is None) and job in turns.holders:
                del turns.holders[job]
                turns.moved = now
            self._serve(turns, now)
            if not turns.holders and not turns.waiting:
                del self.turns[key]

    def _owed(self, turns: _Turns, now: float) -> bool:
        """Whether the longest-waiting waiter has waited its patience (no caller may barge)."""
        for first in turns.waiting.values():
            return now - first.since >= self.patience
        return False

    def _serve(self, turns: _Turns, now: float) -> None:
        """Free turns go to the waiters whose patience is over, in order; a younger first one
        is told once to try."""
        waiting = turns.waiting
        while waiting and turns.room():
            signal = next(iter(waiting))
            if self._owed(turns, now):
                turns.take(signal, now)
            elif waiting[signal].told:
                return
            else:
                waiting[signal].told = True
            signal.set()

    def _sweep(self) -> None:
        """Drop the scopes left with turns that ended without a release and no waiter (locks
        taken and never released here), so that they do not pile up."""
        now = self._clock()
        for key, turns in list(self.turns.items()):
            _expire(turns.holders, now)
            if not turns.holders and not turns.waiting:
                del self.turns[key]
        self._sweep_at = max(SWEEP_AT, 2 * len(self.turns))

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self.turns.clear()  # (in place: its manager reads it)


def _expire(holders: dict[str, float], now: float) -> None:
    """Drop the turns ended by ``now``."""
    for job in [job for job, until in holders.items() if until <= now]:
        del holders[job]


_GATES: weakref.WeakSet[Gate] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for gate in list(_GATES):
        gate._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)
