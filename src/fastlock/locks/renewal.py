"""The lock watchdog: the held locks of ``renew=True`` (``client.lock(..., renew=True)``) kept
alive while their holders run.

:class:`Renewals` is one client's set of held renewing locks (in one process, or one event
loop): every ``min(ttl) / 3`` seconds one round renews all of them, one ``lock_renew`` call per
cluster slot (each lock fenced by its holder and token), the calls sent in one write (one round
trip; one write per node on a cluster). A lock stops being renewed when its holder releases it,
when the thread or task that took it ends, when its lock object is dropped, or when it is lost
(a renewal found another token, or none, or its last known expiry passed: a paused process
renews nothing, and its lock expires as any other). :class:`Renewer` runs the rounds in one
daemon thread per client and process (a fork's child makes its own), :class:`AsyncRenewer` in
one task per client and event loop.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from time import monotonic
from typing import TYPE_CHECKING, Any, TypeVar

from ..exceptions import ArgumentError, ArgumentTypeError
from ..operations import Call
from ..protocol.arguments import unknown_options
from ..protocol.slots import key_slot
from .options import LOCK_KEYWORDS

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "AsyncRenewer",
    "Held",
    "Renewals",
    "Renewer",
    "async_renewer",
    "check_renew",
    "lock_class",
    "renewer",
]

PER_CALL = 256  # locks one lock_renew call renews (bounded work per script)
T = TypeVar("T")


def lock_class(options: Mapping[str, object], ttl: object, plain: T, renewing: T) -> T:
    """The class of a lock built with keywords beyond the common ones: ``renewing`` for
    ``renew=True``, ``plain`` for ``renew=False``; any other keyword is an
    ``UnknownOptionError`` (checked before anything is sent)."""
    if options.keys() != {"renew"}:
        unknown = {key: value for key, value in options.items() if key != "renew"}
        raise unknown_options(unknown, LOCK_KEYWORDS)
    renew = options["renew"]
    return plain if renew is False else check_renew(renew, ttl, renewing)


def check_renew(renew: object, ttl: object, renewing: T) -> T:
    """``renewing`` (the renewing lock class) for ``renew=True``: ``ArgumentTypeError`` for a
    ``renew`` not a bool, ``ArgumentError`` for a lock without a ttl (nothing to renew)."""
    if renew is not True:
        raise ArgumentTypeError(f"renew must be True or False, not {renew!r:.50}")
    if ttl is None:
        raise ArgumentError("renew=True needs a ttl (a lock without one never expires)")
    return renewing


class Held:
    """One holder of a renewing lock: what its renewal sends, and whether it is lost."""

    __slots__ = ("args", "ended", "expires", "keys", "lock", "lost", "period", "released", "renewals")

    def __init__(self, lock: Any, holder: str, token: int, ended: Callable[[], bool], sent: float) -> None:
        self.lock = weakref.ref(lock)
        self.keys: tuple[str, ...] = lock._main_scope.slots
        self.args = (lock.limit, holder, token, lock._ttl_ms)
        self.period: float = lock._ttl_ms / 3000
        # the last expiry known to be set: counted from ``sent``, when the acquire was sent (the
        # server set it later, so this is never late, even if its reply was read after a pause)
        self.expires: float = sent + lock._ttl_ms / 1000
        self.ended = ended
        self.lost = False
        self.released = False
        self.renewals: Renewals | None = None

    def gone(self, now: float | None = None) -> bool:
        """Whether this holder is known not to hold the lock any more (marked lost then; a
        released one keeps what it was)."""
        if not self.lost and not self.released and (now or monotonic()) >= self.expires:
            self.lost = True
        return self.lost

    def stale(self) -> bool:
        """Whether the expiry known is less than two periods away (the acquire waited): the hold
        is then confirmed by one renewal (:meth:`confirmed`) before the acquire returns."""
        return self.expires - monotonic() < 2 * self.period

    def confirmed(self, reply: Any, sent: float) -> None:
        """What a renewal of this holder alone, sent at ``sent``, answered."""
        if reply == [1]:
            self.expires = sent + self.args[3] / 1000
        else:
            self.lost = True

    def release(self) -> None:
        """Stop renewing (before the release is sent: a renewal after it would find it lost)."""
        self.released = True
        if self.renewals is not None and self.renewals.pid == os.getpid():  # (not a fork's parent's)
            self.renewals.drop(self)


class Renewals:
    """The held renewing locks of one client, and when their next round is due."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._held: set[Held] = set()
        self._due: float | None = None
        self.cond = threading.Condition()  # guards the set; a thread's renewer waits on it
        self.wake: Callable[[], None] = self.cond.notify  # (a task's renewer: its event's set)

    def hold(self, held: Held) -> None:
        """Start renewing ``held`` (its first round at most a third of its ttl away)."""
        with self.cond:
            held.renewals = self
            self._held.add(held)
            due = monotonic() + held.period
            if self._due is None or due < self._due:
                self._due = due
            self.wake()

    def drop(self, held: Held) -> None:
        """Stop renewing ``held`` (released)."""
        with self.cond:
            self._held.discard(held)
            if not self._held:
                self._due = None
                self.wake()

    def wait(self) -> float | None:
        """Seconds until the next round (``None``: nothing held)."""
        return None if self._due is None else self._due - monotonic()

    def round(self) -> tuple[list[list[Held]], list[Call], float]:
        """The next round (its next one scheduled): the holders of each call, the calls (one
        per cluster slot and :data:`PER_CALL` locks) and when they are sent; the holders lost,
        ended or dropped meanwhile are not renewed any more."""
        with self.cond:
            now = monotonic()
            for held in [h for h in self._held if h.gone(now) or h.lock() is None or h.ended()]:
                self._held.discard(held)
            slots: dict[int, list[Held]] = {}
            for held in self._held:
                slots.setdefault(key_slot(held.keys[0]), []).append(held)
            self._due = now + min(h.period for h in self._held) if self._held else None
        groups = [held[at : at + PER_CALL] for held in slots.values() for at in range(0, len(held), PER_CALL)]
        calls = [
            Call("lock_renew", [key for h in group for key in h.keys], [a for h in group for a in h.args])
            for group in groups
        ]
        return groups, calls, now

    def settle(self, groups: list[list[Held]], replies: Sequence[Any], sent: float) -> None:
        """After a round's replies: the renewed holders' expiry pushed on, the others lost (a
        failed call changes nothing: a later round tries again while the last expiry holds)."""
        with self.cond:
            for group, reply in zip(groups, replies, strict=True):
                if type(reply) is not list or len(reply) != len(group):
                    continue
                for held, renewed in zip(group, reply, strict=True):
                    if held.released:
                        continue
                    if renewed == 1 and not held.lost:
                        held.expires = sent + held.args[3] / 1000
                    else:
                        held.lost = True
                        self._held.discard(held)
            if not self._held:
                self._due = None


def _pipeline(runner: Any, calls: list[Call]) -> Any:
    """A pipeline of the round's calls (one write; per node on a cluster), or ``None`` for one
    call or a runner without pipelines (a sentinel client): the calls are then sent one by one."""
    if len(calls) == 1 or not hasattr(runner, "pipeline"):
        return None
    pipe = runner.pipeline()
    for call in calls:
        pipe.call(call.name, call.keys, call.args)
    return pipe


class Renewer:
    """The renewing thread of one client in this process: a daemon, started at a hold, ending
    when nothing is held (so a closed or dropped client leaves no thread behind)."""

    def __init__(self, runner: Any) -> None:
        self.renewals = Renewals()
        self.pid = os.getpid()
        self._runner = weakref.ref(runner)
        self._running = False  # guarded by renewals.cond

    def hold(self, held: Held) -> None:
        """:meth:`Renewals.hold`, the thread started if none runs."""
        renewals = self.renewals
        renewals.hold(held)
        with renewals.cond:
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._run, name="fastlock-lock-renewer", daemon=True).start()

    def _run(self) -> None:
        renewals = self.renewals
        while True:
            with renewals.cond:
                while (wait := renewals.wait()) is not None and wait > 0:
                    renewals.cond.wait(wait)
                if wait is None:
                    self._running = False
                    return
            groups, calls, sent = renewals.round()
            runner = self._runner()
            if runner is None:
                return
            if calls:
                try:
                    pipe = _pipeline(runner, calls)
                    if pipe is None:
                        replies = [runner.call(call.name, call.keys, call.args) for call in calls]
                    else:
                        replies = pipe.execute(raise_on_error=False)
                except Exception:  # noqa: BLE001 - a failed round is tried again next period
                    replies = [None] * len(calls)
                del runner
                renewals.settle(groups, replies, sent)


class AsyncRenewer:
    """The renewing task of one client in one event loop (started at a hold, ends when
    nothing is held)."""

    def __init__(self, runner: Any, loop: asyncio.AbstractEventLoop) -> None:
        import asyncio  # here: the runtime loads asyncio only for its users

        self.renewals = Renewals()
        self.loop = loop
        self._runner = weakref.ref(runner)
        self._event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.renewals.wake = self._event.set

    def hold(self, held: Held) -> None:
        """:meth:`Renewals.hold`, the task started (or woken)."""
        self.renewals.hold(held)
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._run(), name="fastlock-lock-renewer")

    async def _run(self) -> None:
        import asyncio  # here: the runtime loads asyncio only for its users

        renewals = self.renewals
        while (wait := renewals.wait()) is not None:
            if wait > 0:
                self._event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._event.wait(), wait)
                continue
            groups, calls, sent = renewals.round()
            runner = self._runner()
            if runner is None:
                return
            if calls:
                try:
                    pipe = _pipeline(runner, calls)
                    if pipe is None:
                        replies = [await runner.call(call.name, call.keys, call.args) for call in calls]
                    else:
                        replies = await pipe.execute(raise_on_error=False)
                except Exception:  # noqa: BLE001 - a failed round is tried again next period
                    replies = [None] * len(calls)
                del runner
                renewals.settle(groups, replies, sent)


_renewers: weakref.WeakKeyDictionary[Any, Renewer] = weakref.WeakKeyDictionary()
_async_renewers: weakref.WeakKeyDictionary[Any, AsyncRenewer] = weakref.WeakKeyDictionary()
_making = threading.Lock()


def renewer(runner: Any) -> Renewer:
    """``runner``'s renewing thread in this process (made at the first call)."""
    found = _renewers.get(runner)
    if found is None or found.pid != os.getpid():
        with _making:
            found = _renewers.get(runner)
            if found is None or found.pid != os.getpid():
                found = _renewers[runner] = Renewer(runner)
    return found


def async_renewer(runner: Any) -> AsyncRenewer:
    """``runner``'s renewing task in the running event loop (made at the first call)."""
    import asyncio  # here: the runtime loads asyncio only for its users

    loop = asyncio.get_running_loop()
    found = _async_renewers.get(runner)
    if found is None or found.loop is not loop:
        found = _async_renewers[runner] = AsyncRenewer(runner, loop)
    return found


def _after_fork_in_child() -> None:
    global _making
    _making = threading.Lock()
    _renewers.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
