"""Operations written once for every transport (sans-IO: no socket, thread or sleep here).

Domain code (scripts, locks, queues) talks to a transport through :class:`Runner`. A
single-call operation is a direct ``runner.call(...)`` followed by a reply parser that lives
beside the domain types: no generator on the hot path. A multi-step operation (NOSCRIPT/BUSY
recovery, the lock wait loop, paging) is a generator that yields :data:`Step` requests and
receives each one's result, or has its exception thrown in: the sync client runs it with
blocking calls (:func:`fastlock.sync.drive.drive`), an asyncio client awaits the same steps.
This is the pattern of psycopg 3's ``generators.py``. Steps are named tuples: immutable, and
made at a fraction of a frozen dataclass's cost (a waiting acquire makes several).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias, TypeVar

__all__ = [
    "AsyncRunner",
    "Blocking",
    "Call",
    "run_plan",
    "run_plan_async",
    "Command",
    "Commands",
    "Operation",
    "Runner",
    "Listen",
    "Notice",
    "Sleep",
    "Step",
]

T = TypeVar("T")
S = TypeVar("S")


class Call(NamedTuple):
    """Run script ``name`` with the transport's script policy; the result is its reply."""

    name: str
    keys: Sequence[Any] = ()
    args: Sequence[Any] = ()
    busy_timeout: float | None = None


class Command(NamedTuple):
    """Run one command; the result is its reply (an error reply is raised into the operation)."""

    args: tuple[Any, ...]


class Blocking(NamedTuple):
    """Run a blocking command that may wait ``timeout`` seconds on the server."""

    args: tuple[Any, ...]
    timeout: float


class Commands(NamedTuple):
    """Send ``commands`` in one write; the result is their replies in order, error replies in
    place as :class:`~fastlock.ResponseError` instances."""

    commands: Sequence[tuple[Any, ...]]


class Sleep(NamedTuple):
    """Wait ``seconds`` (the sync transport sleeps, an asyncio one awaits); the result is ``None``."""

    seconds: float


class Notice(NamedTuple):
    """Wait up to ``timeout`` seconds for ``signal``'s wake-up (its ``wait``, awaited on
    asyncio); the result is what ``wait`` returns: the fencing token of a lock handed over
    to the waiter, else ``None`` (or a flag)."""

    signal: Any
    timeout: float


class Listen(NamedTuple):
    """Enter waiter ``job`` on ``channel`` of a client's wake-up ``listener``
    (:mod:`fastlock.locks.notify`; its ``listen``, awaited on asyncio); the result is the
    waiter's signal, once the server has confirmed the subscription."""

    listener: Any
    channel: bytes
    job: str = ""


Step: TypeAlias = Call | Command | Blocking | Commands | Sleep | Notice | Listen
Operation: TypeAlias = Generator[Step, Any, T]
"""A multi-step operation: yields steps, receives their results, returns its own."""


class Runner(Protocol):
    """What domain code needs from a (blocking) transport; :class:`~fastlock.Client` is one.
    An asyncio transport offers the same methods as coroutines."""

    def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` (EVALSHA, with the NOSCRIPT/BUSY policy) and return its reply."""
        ...

    def execute(self, *args: Any) -> Any:
        """Run one command and return its reply."""
        ...

    def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command that may wait ``timeout`` seconds on the server."""
        ...

    def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` in one write; replies in order, error replies in place."""
        ...

    def run(self, operation: Operation[T]) -> T:
        """Run a multi-step operation to its end and return what it returns."""
        ...


class AsyncRunner(Protocol):
    """The asyncio twin of :class:`Runner`: the same methods, awaited."""

    async def call(
        self,
        name: str,
        keys: Sequence[Any] = (),
        args: Sequence[Any] = (),
        *,
        busy_timeout: float | None = None,
    ) -> Any:
        """Run script ``name`` (EVALSHA, with the NOSCRIPT/BUSY policy) and return its reply."""
        ...

    async def execute(self, *args: Any) -> Any:
        """Run one command and return its reply."""
        ...

    async def execute_blocking(self, *args: Any, timeout: float) -> Any:
        """Run a blocking command that may wait ``timeout`` seconds on the server."""
        ...

    async def execute_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` in one write; replies in order, error replies in place."""
        ...

    async def run(self, operation: Operation[T]) -> T:
        """Run a multi-step operation to its end and return what it returns."""
        ...


def run_plan(plan: Generator[S, Any, T], perform: Callable[[S], object]) -> T:
    """Run a generator of requests (steps, or a worker's acts): each request's result from
    ``perform`` is sent in, its ``Exception`` thrown in (the plan may handle it); anything
    else (KeyboardInterrupt, ...) closes the plan. The one loop behind the sync drivers."""
    result: object = None
    failure: Exception | None = None
    while True:
        try:
            request = plan.send(result) if failure is None else plan.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            failure = None  # not kept alive in a frame a traceback can reach
        try:
            result = perform(request)
        except Exception as exc:  # noqa: BLE001 - thrown into the plan, which decides
            failure, result = exc, None
        except BaseException:
            plan.close()
            raise


async def run_plan_async(plan: Generator[S, Any, T], perform: Callable[[S], Awaitable[object]]) -> T:
    """:func:`run_plan` with ``perform`` awaited (cancellation closes the plan)."""
    result: object = None
    failure: Exception | None = None
    while True:
        try:
            request = plan.send(result) if failure is None else plan.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            failure = None  # not kept alive in a frame a traceback can reach
        try:
            result = await perform(request)
        except Exception as exc:  # noqa: BLE001 - thrown into the plan, which decides
            failure, result = exc, None
        except BaseException:
            plan.close()
            raise
