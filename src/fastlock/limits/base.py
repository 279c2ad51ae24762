"""What every transport's rate limiter shares: its options (checked before anything is sent),
its key, the arguments of a decision, the reply parser and the waiting acquire as an operation
of steps. The transport's shell (:class:`~fastlock.limits.limiter.Limiter` for a blocking
runner, :class:`~fastlock.aio.AsyncLimiter`) adds the calls. Semantics: ``docs/limits.md``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypedDict, TypeVar

from ..exceptions import ArgumentError, ArgumentTypeError, ProtocolError
from ..operations import Call, Operation, Sleep
from ..protocol.arguments import duration_ms
from ..protocol.slots import tagged_base

__all__ = [
    "KINDS",
    "MAX_RATE",
    "MAX_WINDOW_LIMIT",
    "Decision",
    "LimiterBase",
    "LimiterOptions",
    "decided",
    "gcra_args",
    "queue_rate_args",
]

Kind = Literal["gcra", "window"]
KINDS: tuple[Kind, ...] = ("gcra", "window")
MAX_RATE = 10**9
"""Largest ``rate`` (and ``burst``) a limiter takes."""
MAX_WINDOW_LIMIT = 10_000
"""Largest ``rate`` of a ``window`` limiter: its key logs every admission of the window."""
MIN_INTERVAL_MS = 0.01
"""Shortest GCRA emission interval (``per / rate``): at most 100,000 admissions per second,
so that a step of the theoretical arrival time stays far above a double's resolution."""

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision: ``allowed``; ``remaining``, how many more would be admitted right now;
    ``retry_after``, the seconds (server clock) before the same request would be admitted
    (0 when it was). True when allowed."""

    allowed: bool
    remaining: int
    retry_after: float

    def __bool__(self) -> bool:
        return self.allowed


def decided(reply: Any) -> Decision:
    """The decision of a ``limit_gcra`` or ``limit_window`` reply ``{admitted, remaining, retry us}``."""
    try:
        admitted, remaining, retry_us = reply
        if type(admitted) is int and type(remaining) is int and type(retry_us) is int:
            return Decision(admitted == 1, remaining, retry_us / 1_000_000)
    except (TypeError, ValueError):
        pass
    raise ProtocolError(f"unexpected reply from a limiter script: {reply!r:.200}")


def checked_count(value: object, name: str, high: int) -> int:
    """``value`` if it is an int (not a bool) in ``[1, high]``; else ArgumentTypeError or ArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int, not {type(value).__qualname__!r}")
    if not 1 <= value <= high:
        raise ArgumentError(f"{name} must be between 1 and {high}, not {value}")
    return value


def gcra_args(rate: object, per: object, burst: object) -> tuple[float, float, int]:
    """The emission interval and burst tolerance (ms) of ``rate`` per ``per`` seconds with
    ``burst`` admitted at once (``None``: ``rate``), each checked, and the burst."""
    count = checked_count(rate, "rate", MAX_RATE)
    interval = duration_ms(per, "per") / count
    if interval < MIN_INTERVAL_MS:
        raise ArgumentError(f"rate / per must be at most 100,000 per second, not {count} per {per!r} s")
    burst = count if burst is None else checked_count(burst, "burst", MAX_RATE)
    return interval, (burst - 1) * interval, burst


def queue_rate_args(rate: object) -> tuple[str, str]:
    """A queue's ``rate`` option as the GCRA interval and tolerance (ms) its claims send."""
    if not isinstance(rate, tuple) or len(rate) not in (2, 3):
        raise ArgumentTypeError(f"rate must be (count, per) or (count, per, burst), not {rate!r}")
    count, per, burst = rate if len(rate) == 3 else (*rate, None)
    interval, tolerance, _ = gcra_args(count, per, burst)
    return repr(interval), repr(tolerance)


def wait_until_admitted(
    decide: Callable[[], Call], timeout: float | None, clock: Callable[[], float] = time.monotonic
) -> Operation[Decision]:
    """Call ``decide()`` until admitted, sleeping each denial's ``retry_after`` in between (the
    server said when; no polling). Gives up at once, returning the denial, when the next try
    would come after ``timeout`` seconds (``None``: no limit)."""
    deadline = math.inf if timeout is None else clock() + timeout
    while True:
        decision = decided((yield decide()))
        if decision.allowed or clock() + decision.retry_after > deadline:
            return decision
        yield Sleep(decision.retry_after)


class LimiterOptions(TypedDict, total=False):
    """The keyword options of a limiter (see :class:`LimiterBase`)."""

    per: float
    burst: int | None
    kind: Kind
    prefix: str


class LimiterBase(Generic[R]):
    """A rate limiter named ``name`` over the transport ``client``: at most ``rate`` admissions
    per ``per`` seconds, decided on the server clock by one script on one key
    (``<prefix>:{name}:limit:<kind>``, one cluster slot).

    ``kind="gcra"`` (the default): the generic cell rate algorithm, admissions spaced
    ``per / rate`` apart on average with ``burst`` (default ``rate``) admitted at once after a
    quiet spell. ``kind="window"``: a sliding window, at most ``rate`` admissions in any
    ``per`` seconds (``rate`` at most :data:`MAX_WINDOW_LIMIT`; no ``burst``).
    Every process using a limiter should pass the same options.
    """

    def __init__(
        self,
        client: R,
        name: str,
        *,
        rate: int = 100,
        per: float = 1.0,
        burst: int | None = None,
        kind: Kind = "gcra",
        prefix: str = "fl",
    ) -> None:
        if kind not in KINDS:
            raise ArgumentError(f"kind must be one of {KINDS}, not {kind!r}")
        base = tagged_base(prefix, name, "limiter")
        if kind == "gcra":
            interval, tolerance, self.limit = gcra_args(rate, per, burst)
            self._head: tuple[Any, ...] = (repr(interval), repr(tolerance))
        else:
            if burst is not None:
                raise ArgumentError("a window limiter takes no burst: it admits rate per window")
            self.limit = checked_count(rate, "rate", MAX_WINDOW_LIMIT)
            self._head = (duration_ms(per, "per"), self.limit)
        self.client = client
        self.name = name
        self.kind = kind
        self.rate = rate
        self.per = per
        self.script = f"limit_{kind}"
        self.key = f"{base}limit:{kind}"
        self.keys = (self.key,)

    def __repr__(self) -> str:
        return f"<fastlock.Limiter {self.name!r} {self.kind} rate={self.rate} per={self.per}>"

    def _args(self, n: int) -> tuple[Any, ...]:
        """The script's arguments for ``n`` admissions at once (checked: 1 <= n <= the burst
        or window limit, above which no decision could ever admit them)."""
        if type(n) is not int or not 1 <= n <= self.limit:
            checked_count(n, "n", self.limit)
        return (*self._head, n)

    def _call(self, n: int) -> Call:
        return Call(self.script, self.keys, self._args(n))

    def _acquire(self, n: int, timeout: float | None) -> Operation[Decision]:
        if timeout is not None:
            duration_ms(timeout, "timeout", minimum_ms=0)
        call = self._call(n)
        return wait_until_admitted(lambda: call, timeout)
