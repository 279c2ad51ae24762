"""Acquire attempts and the wait for a release, written once as operations (sans-IO).

A blocked acquirer sleeps until a release of a flagged slot wakes it, and tries again; it
never polls. With a ``signal`` (a client's wake-up listener, :mod:`fastlock.locks.notify`)
it sleeps in-process, at most :data:`~fastlock.locks.notify.MAX_NAP` at a time; without one,
on the scope's wake list (``BLPOP``, a connection of its own), at most :data:`MAX_BLOCK`.
Each single wait also ends at the acquirer's deadline and at the holders' expiry (their
slots go without a release).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..exceptions import ConnectionError
from ..operations import Blocking, Call, Notice, Operation
from .notify import MAX_NAP
from .replies import acquire_reply

__all__ = ["MAX_BLOCK", "attempt", "resend", "wait_for"]

MAX_BLOCK = 30.0  # longest single wait on a wake list, in seconds


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


def wait_for(
    first: Call,
    again: Call,
    wake: str,
    wait: float,
    clock: Callable[[], float] = time.monotonic,
    signal: Any = None,
) -> Operation[Any]:
    """Acquire with ``first`` (its flags ask holders to wake us); on conflict wait for
    ``signal`` (else on the wake list ``wake``) and try ``again``, until taken or ``wait``
    seconds (by ``clock``) have passed. The fencing token, or the last conflict reply."""
    reply = yield from attempt(first)
    if type(reply) is int:
        return reply
    deadline = clock() + wait
    while True:
        left = deadline - clock()
        if left <= 0:
            return reply
        expiry = reply[0]
        block = min(left, expiry / 1000 + 0.002 if expiry >= 0 else math.inf)
        if signal is not None:
            yield Notice(signal, min(block, MAX_NAP))
        else:
            block = math.ceil(min(block, MAX_BLOCK) * 1000) / 1000  # BLPOP reads ms; 0: for ever
            yield Blocking(("BLPOP", wake, block), block)
        reply = yield from attempt(again)
        if type(reply) is int:
            return reply
