"""Periodic jobs: a queue's schedules (``every`` seconds or a cron expression in a time zone,
read by croniter: the extra ``fastlock[cron]``), stored on the server beside the queue (its
hash tag), and the scheduler's loop as an operation of steps. Each tick is enqueued by one
call of ``lua/queue_schedule.lua`` that checks the schedule's due time is unchanged, enqueues
the tick's job (its id: the schedule's name and the tick's due time) and moves the due time
on, at once: however many schedulers run, a tick is enqueued once. docs/queues.md, "Periodic
jobs"."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..exceptions import ArgumentError, ArgumentTypeError
from ..operations import Blocking, Call, Operation, Sleep
from ..protocol.arguments import duration_ms
from .base import _check_payload

__all__ = [
    "CATCH_UP",
    "MAX_CATCH_UP",
    "MIN_PERIOD",
    "SKIP_GRACE",
    "Schedule",
    "Spec",
    "run_schedules",
]

CATCH_UP = ("skip", "one", "all")
MAX_CATCH_UP = 100
"""Most missed ticks one catch-up enqueues (``catch_up="all"``); older ones are dropped."""
MIN_PERIOD = 0.01
"""The shortest ``every`` period, in seconds."""
SKIP_GRACE = 1000
"""``catch_up="skip"``: a tick found this many ms late or more is dropped."""
IDLE = 5.0
"""Longest wait of a scheduler between two reads of the schedules (and of its ``stop``)."""
SERVER_WAIT = 0.25
"""A scheduler sleeps the last this many seconds before a tick on its own clock (a server
times a blocking command out at its ``hz``, 100 ms by default), the rest in BZPOPMIN."""
_NAME_LIMIT = 200
_SUFFIXES = ("sched", "sched:payload", "sched:due", "sched:wake")


@dataclass(frozen=True, slots=True)
class Spec:
    """When a schedule ticks: every ``every_ms``, or at ``cron`` in ``tz``; and its catch-up."""

    every_ms: int = 0
    cron: str = ""
    tz: str = "UTC"
    catch_up: str = "one"

    def text(self) -> str:
        """The spec as stored (canonical JSON: an unchanged schedule is recognised)."""
        data: dict[str, Any] = {"catch_up": self.catch_up}
        data.update({"every_ms": self.every_ms} if self.every_ms else {"cron": self.cron, "tz": self.tz})
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str | bytes) -> Spec:
        return cls(**json.loads(text))

    def after(self, at_ms: int) -> int:
        """The first tick strictly after ``at_ms`` (ms since the epoch)."""
        if self.every_ms:
            return (at_ms // self.every_ms + 1) * self.every_ms
        return round(float(_croniter(self.cron, self.tz, at_ms).get_next(float)) * 1000)

    def due(self, first_ms: int, now_ms: int) -> tuple[list[int], int]:
        """The ticks to enqueue when the schedule's tick ``first_ms`` is found due at ``now_ms``,
        by the catch-up policy, and the due time that follows them."""
        after = self.after(now_ms)
        if self.every_ms:
            latest = list(range(now_ms - now_ms % self.every_ms, first_ms - 1, -self.every_ms)[:MAX_CATCH_UP])
        else:
            walk, latest = _croniter(self.cron, self.tz, now_ms + 1), []
            while len(latest) < MAX_CATCH_UP:
                tick = round(walk.get_prev(float) * 1000)
                if tick < first_ms:
                    break
                latest.append(tick)
        latest.reverse()  # oldest first
        if self.catch_up == "one":
            return latest[-1:], after
        if self.catch_up == "skip":
            return [tick for tick in latest if now_ms - tick < SKIP_GRACE], after
        return latest, after


@dataclass(frozen=True, slots=True)
class Schedule:
    """A stored schedule: its ``name``, its :class:`Spec` and its next due time (s since the
    epoch, server clock)."""

    name: str
    spec: Spec
    due: float


def _croniter(expression: str, tz: str, at_ms: int) -> Any:
    from zoneinfo import ZoneInfo

    from croniter import croniter

    return croniter(expression, datetime.fromtimestamp(at_ms / 1000, ZoneInfo(tz)))


def schedule_keys(plain_keys: Sequence[str], prefix: str) -> tuple[str, ...]:
    """The keys of ``queue_schedule``: the queue's first 3, then its schedules' 4."""
    return (*plain_keys, *(prefix + suffix for suffix in _SUFFIXES))


def check_name(name: object) -> str:
    if not isinstance(name, str):
        raise ArgumentTypeError(f"a schedule name must be a str, not {type(name).__qualname__!r}")
    if not 0 < len(name) <= _NAME_LIMIT or "|" in name or "@" in name:
        raise ArgumentError(f"a schedule name has 1 to {_NAME_LIMIT} characters, no '|' or '@': {name!r}")
    return name


def _catch_up(catch_up: object) -> str:
    if catch_up not in CATCH_UP:
        raise ArgumentError(f"catch_up must be one of {CATCH_UP}, not {catch_up!r}")
    return str(catch_up)


def every_spec(seconds: object, catch_up: object) -> Spec:
    """The checked spec of ``every(seconds)``."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ArgumentTypeError(f"seconds must be a number, not {type(seconds).__qualname__!r}")
    if not MIN_PERIOD <= seconds <= 366 * 86400:
        raise ArgumentError(f"every takes {MIN_PERIOD} s to a year, not {seconds!r}")
    return Spec(every_ms=round(seconds * 1000), catch_up=_catch_up(catch_up))


def cron_spec(expression: object, tz: object, catch_up: object) -> Spec:
    """The checked spec of ``cron(expression, tz=tz)`` (croniter reads the expression)."""
    try:
        from croniter import croniter
    except ImportError:  # pragma: no cover - the extra is part of the test install
        raise ArgumentError("cron schedules need croniter: pip install 'fastlock[cron]'") from None
    from zoneinfo import ZoneInfo

    if not isinstance(expression, str) or not isinstance(tz, str):
        raise ArgumentTypeError("a cron expression and its tz are str")
    if not croniter.is_valid(expression):
        raise ArgumentError(f"not a cron expression: {expression!r}")
    try:
        ZoneInfo(tz)
    except (ValueError, KeyError):
        raise ArgumentError(f"not a time zone: {tz!r}") from None
    return Spec(cron=expression, tz=tz, catch_up=_catch_up(catch_up))


def register(keys: Sequence[str], name: str, spec: Spec, payload: bytes | str) -> Operation[bool]:
    """Store a schedule, its first due time the first tick after the server's now (name and
    payload checked before the first call)."""
    return _register(keys, check_name(name), spec, _checked_payload(payload))


def _checked_payload(payload: object) -> Any:
    _check_payload(payload)
    return payload


def _register(keys: Sequence[str], name: str, spec: Spec, payload: bytes | str) -> Operation[bool]:
    now_ms = int((yield Call("queue_schedule", keys, ("next",)))[0])
    args = ("set", name, spec.text(), payload, str(spec.after(now_ms)))
    return bool((yield Call("queue_schedule", keys, args)))


def schedules(reply: list[Any]) -> list[Schedule]:
    """The reply of ``queue_schedule list``."""
    return [Schedule(_text(name), Spec.parse(spec), int(due) / 1000) for name, spec, due in reply]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def run_schedules(
    keys: Sequence[str],
    stop: Callable[[], bool] | None = None,
    idle: float = IDLE,
    interrupt: str | None = None,
) -> Operation[int]:
    """The scheduler: wait (BZPOPMIN on the schedules' wake marker, woken by a new schedule;
    the last :data:`SERVER_WAIT` seconds a sleep) until the earliest schedule is due by the
    server clock (read at each call, then advanced by the local monotonic clock), enqueue its
    ticks, and again, until ``stop()`` is true (checked at least every ``idle`` seconds, and
    when something is added to the sorted set ``interrupt``). Returns the jobs it enqueued."""
    woken_by = (keys[6],) if interrupt is None else (keys[6], interrupt)
    return _scheduler(keys, stop, duration_ms(idle, "idle", minimum_ms=10) / 1000, woken_by)


def _scheduler(
    keys: Sequence[str], stop: Callable[[], bool] | None, idle: float, woken_by: tuple[str, ...]
) -> Operation[int]:
    state = yield Call("queue_schedule", keys, ("next",))
    read_at, enqueued = time.monotonic(), 0
    while stop is None or not stop():
        now = int(state[0]) + round((time.monotonic() - read_at) * 1000)  # the server's, estimated
        if len(state) > 1 and int(state[2]) <= now:
            due = int(state[2])
            spec = Spec.parse(state[3])
            ticks, after = spec.due(due, now)
            name = _text(state[1])
            args = ["tick", name, state[3], str(due), str(after), *(f"{name}@{tick}" for tick in ticks)]
            reply = yield Call("queue_schedule", keys, args)
            enqueued += max(0, reply[0])
            state, read_at = reply[1:], time.monotonic()
            continue
        wait = idle if len(state) == 1 else (int(state[2]) - now) / 1000
        if len(state) > 1 and wait <= SERVER_WAIT:
            yield Sleep(wait)  # the tick is near: the client's clock (the server's timeouts are coarse)
            continue
        wait = min(idle, wait if len(state) == 1 else wait - SERVER_WAIT)
        woken = yield Blocking(("BZPOPMIN", *woken_by, f"{wait:.3f}"), wait)
        if woken is not None or wait == idle:  # a schedule changed, or a while passed: read again
            state, read_at = (yield Call("queue_schedule", keys, ("next",))), time.monotonic()
    return enqueued
