"""Acquire attempts and the wait for a release, written once as operations (sans-IO).

A blocked acquirer sleeps until a release of a flagged slot wakes it, and tries again; it
never polls. With a client's wake-up listener (:mod:`fastlock.locks.notify`) it sleeps
in-process, at most :data:`~fastlock.locks.notify.MAX_NAP` at a time; without one,
on the scope's wake list (``BLPOP``, a connection of its own; a read-write lock's waiter on its
wake stream, ``XREAD``), at most :data:`MAX_BLOCK` (the caller may ask for less).
Each single wait also ends at the acquirer's deadline and at the holders' expiry (their
slots go without a release).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from ..exceptions import ConnectionError
from ..operations import Blocking, Call, Listen, Notice, Operation
from .notify import MAX_NAP
from .replies import acquire_reply

__all__ = ["MAX_BLOCK", "WaitPlan", "attempt", "resend", "wait_for"]

MAX_BLOCK = 30.0  # longest single wait on a wake list, in seconds
PATIENCE_MARGIN = 0.002  # a waiter re-checks this long after its patience ends (clocks differ)


def resend(lost: ConnectionError, step: Call) -> Operation[Any]:
    """Re-send an acquire whose reply ``lost`` was lost once it was sent (acquire is
    idempotent: a job that holds the lock gets its token back); ``lost`` if it was not sent."""
    if not lost.sent:
        raise lost
    return (yield step)


def attempt(step: Call) -> Operation[Any]:
    """One acquire call (re-sent if its reply was lost): the fencing token, or the conflict
    reply ``[ms to expiry, holders...]``."""
    try:
        reply = yield step
    except ConnectionError as lost:
        reply = yield from resend(lost, step)
    return acquire_reply(step.name, reply)


class WaitPlan(NamedTuple):
    """What one waiting acquire sends: ``first`` (its flags ask holders to wake us), ``again``
    after a conflict, ``last`` at the deadline (a listening waiter's leaves the queue; ``None``:
    no last attempt). With a listener: the waiter ``job`` (the id of this wait), the call
    ``leave`` the listener runs if the wait is cancelled (or fails) while queued, ``handed``
    called when a release handed the lock over, the ``patience`` the releases grant the waiter
    (see :func:`wait_for`). Without one: the wake list ``wake`` (``BLPOP``; or the command
    ``blocker(conflict, seconds)`` gives), at most ``block`` seconds at a time."""

    first: Call
    again: Call
    wake: str
    last: Call | None = None
    job: str = ""
    leave: Call | None = None
    handed: Callable[[], object] | None = None
    patience: float = 0.0
    block: float = MAX_BLOCK
    blocker: Callable[[Any, float], tuple[Any, ...]] | None = None


def wait_for(
    plan: WaitPlan,
    wait: float,
    listener: Any = None,
    clock: Callable[[], float] = time.monotonic,
    conflict: list[Any] | None = None,
    signal: Any = None,
) -> Operation[Any]:
    """Acquire with ``plan.first``; on conflict wait for a release and try ``plan.again``,
    until taken or ``wait`` seconds (by ``clock``) have passed. Given the ``conflict`` reply
    of an attempt sent already, the wait goes on from that conflict: ``plan.first``'s, or,
    with the ``signal`` the waiter was entered with on the listener, ``plan.again``'s.

    With a ``listener`` (:mod:`fastlock.locks.notify`) the wait is in-process: after the
    first conflict the waiter is entered on the listener, and once the server has confirmed
    its subscription it tries ``again`` (on a channel already listened to it is entered at
    once and tries ``again`` first), which also queues it for a hand-over (a release gives the
    lock to the first live queued waiter, by the end of its patience, and tells it the token:
    no further attempt; ``plan.handed()`` is called then; before the waiter has been queued ``plan.patience``
    seconds, a release frees the lock and wakes it to try again instead, and it re-checks once
    when its patience ends). A waiter whose subscription was lost (a routed listener's: a
    failover, a slot moved) tries ``again`` (its client follows the topology), enters again
    where its channel is served now, and tries ``again``: woken by the loss, or at once when
    the loss is found before a wait (it came during a re-check); a second loss in a row
    found so naps first (a topology in flux is not polled). At its deadline it tries
    ``plan.last``; if it is cancelled (or fails) while queued, the listener runs
    ``plan.leave``; a connection lost by a re-check is retried at the next one. Without a
    listener it blocks (:class:`WaitPlan`) and tries ``last`` (if given) at its deadline.
    The fencing token, or the last conflict reply."""
    again, job, patience = plan.again, plan.job, plan.patience
    # a channel this client listens on already: the waiter enters first, without I/O, and
    # its first attempt queues it (the release's message cannot come before it is entered)
    channel: bytes = b"" if listener is None else listener.channel(plan.wake)
    if signal is None and listener is not None and conflict is None:
        signal = listener.join(channel, job)
    done = False
    try:
        if conflict is None:
            reply = yield from attempt(plan.first if signal is None else again)
            if type(reply) is int:
                done = True
                return reply
        else:
            reply = conflict
        deadline = clock() + wait
        if listener is None:
            done = True
            return (yield from _blocking(plan, deadline, clock, reply))
        if signal is None:
            signal = yield Listen(listener, channel, job)
            reply = yield from _recheck(again)
        patient_until = clock() + patience  # queued: a release hands it the lock after this
        hurried = False  # entered again at once after a loss, with no wait since
        while type(reply) is not int:
            nap = _nap(deadline - clock(), reply)
            if patience and (left := patient_until - clock()) > 0:  # one re-check at its end,
                nap = min(nap, left + PATIENCE_MARGIN)  # which takes a lock freed meanwhile
            if nap <= 0:
                if plan.last is not None:
                    reply = yield from attempt(plan.last)
                break
            if signal.lost and signal.token is None and not hurried:  # lost in the re-check
                hurried, given = True, None
            else:
                hurried = hurried and signal.lost
                given = yield Notice(signal, min(nap, MAX_NAP))
            if type(given) is int:
                reply = given
                if plan.handed is not None:
                    plan.handed()
                break
            if signal.lost:  # a failover, a slot moved: the attempt follows the topology, then
                reply = yield from _recheck(again)  # the waiter enters where its channel is now
                if type(reply) is int:
                    break
                listener.leave(channel, signal)
                signal = yield Listen(listener, channel, job)
            reply = yield from _recheck(again)
        done = True
        return reply
    finally:
        if signal is not None:
            listener.leave(channel, signal)
            if not done and plan.leave is not None:
                listener.abandon(plan.leave)


def _recheck(again: Call) -> Operation[Any]:
    """A listening waiter's attempt; a connection lost on the way (a node killed) counts as a
    conflict of unknown expiry: tried again at the next re-check (an acquire is idempotent: one
    that ran is answered with its token then), the error raised only by the one at the deadline."""
    try:
        return (yield from attempt(again))
    except ConnectionError:
        return [-1]


def _nap(left: float, conflict: list[Any]) -> float:
    """How long to wait at most: ``left`` of the deadline, and until the holders' expiry."""
    if left <= 0:
        return left
    expiry = conflict[0]
    return min(left, expiry / 1000 + 0.002 if expiry >= 0 else math.inf)


def _blocking(plan: WaitPlan, deadline: float, clock: Callable[[], float], reply: Any) -> Operation[Any]:
    """Wait on the wake list (``BLPOP``, or ``plan.blocker``'s command, on a connection of its
    own, at most ``plan.block`` seconds at a time) and try ``again``; at the deadline, ``last``
    (if given)."""
    blocker = plan.blocker
    while True:
        block = _nap(deadline - clock(), reply)
        if block <= 0:
            return reply if plan.last is None else (yield from attempt(plan.last))
        block = math.ceil(min(block, plan.block) * 1000) / 1000  # BLPOP reads ms; 0: for ever
        command = ("BLPOP", plan.wake, block) if blocker is None else blocker(reply, block)
        yield Blocking(command, block)
        reply = yield from attempt(plan.again)
        if type(reply) is int:
            return reply
