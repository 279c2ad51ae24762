"""A worker on asyncio: :class:`AsyncWorker`, the same loop as :class:`~fastlock.queues.worker.Worker`
(the plan of :class:`~fastlock.queues.policy.WorkerBase`: batches, completion, failures,
retries and dead letters, transient errors, recovery, idle waits without polling), awaited.

``concurrency`` loops run as tasks, each with its own batch; one heartbeat task renews
the leases of every job the worker holds (the bookkeeping of
:class:`~fastlock.queues.policy.Leases`). :meth:`AsyncWorker.stop` is graceful: nothing more
is claimed, idle loops are woken, and :meth:`AsyncWorker.run` returns once each loop has
finished (completed or failed) the jobs it holds. A handler is a coroutine function; one
that blocks the event loop also stalls the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..exceptions import ArgumentTypeError
from ..queues.calls import checked_int
from ..queues.jobs import Job
from ..queues.policy import TRANSIENT, Act, Leases, Plan, WorkerBase
from .queue import AsyncQueue

__all__ = ["AsyncWorker"]


class AsyncWorker(WorkerBase[AsyncQueue]):
    """Run ``await handler(job)`` on the jobs of ``queue`` in ``concurrency`` tasks, ``batch``
    claimed at a time by each; the options and the semantics of
    :class:`~fastlock.queues.worker.Worker`."""

    _stopping: asyncio.Event

    def __init__(
        self,
        queue: AsyncQueue,
        handler: Callable[[Job], Awaitable[object]],
        *,
        concurrency: int = 1,
        batch: int = 10,
        idle_wait: float = 5.0,
        recover_limit: int = 1000,
    ) -> None:
        if not isinstance(queue, AsyncQueue):
            raise ArgumentTypeError("AsyncWorker takes an AsyncQueue and a coroutine function")
        self.concurrency = checked_int(concurrency, "concurrency", 1, 10_000)
        super().__init__(
            queue, handler, batch=batch, idle_wait=idle_wait, recover_limit=recover_limit, loops=concurrency
        )
        self._stopping = asyncio.Event()
        self._leases = Leases()
        self._held = asyncio.Event()  # set when the heartbeat should look again

    async def stop(self) -> None:
        """Ask :meth:`run` to return once each loop has finished its current batch (nothing
        more is claimed); idle loops are woken at once. A stopped worker stays stopped."""
        self._stopping.set()
        for key in self._interrupts:
            try:
                await self.queue.interrupt(key)
            except TRANSIENT as exc:
                self._warn(exc, "could not wake the worker to stop it")

    async def run(self, *, max_jobs: int | None = None) -> int:
        """Process jobs until :meth:`stop` is called or ``max_jobs`` jobs were handled (by all
        loops together); returns the number of jobs handled."""
        tally = self._tally(max_jobs)
        beat = asyncio.create_task(self._heartbeat(), name="fastlock-heartbeat")
        try:
            loops = [self._drive(self._looping(tally, self, key)) for key in self._interrupts]
            await asyncio.gather(*loops)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        return tally.handled

    # the leases of every loop, renewed by the heartbeat task
    def hold(self, queue: AsyncQueue, jobs: list[Job]) -> None:
        self._leases.hold(queue, jobs)
        self._held.set()

    def release(self, queue: AsyncQueue, jobs: list[Job]) -> None:
        self._leases.release(queue, jobs)

    async def _heartbeat(self) -> None:
        while True:
            due, wait = self._leases.due()
            for queue, jobs in due:
                try:
                    lost = await queue.extend(jobs)
                except Exception as exc:  # noqa: BLE001 - the heartbeat must outlive any failed call
                    self._leases.failed(queue, exc)
                    continue
                self._leases.renewed(queue, lost)
            if not due:
                self._held.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._held.wait(), wait)

    async def _drive(self, plan: Plan) -> None:
        """Run one loop's plan: each act awaited, its result sent in, its ``Exception``
        thrown in; anything else (cancellation, ...) closes it."""
        result: Any = None
        failure: Exception | None = None
        while True:
            try:
                act = plan.send(result) if failure is None else plan.throw(failure)
            except StopIteration:
                return
            finally:
                failure = None
            try:
                result = await self._perform(act)
            except Exception as exc:  # noqa: BLE001 - thrown into the plan, which decides
                failure, result = exc, None
            except BaseException:
                plan.close()
                raise

    async def _perform(self, act: Act) -> Any:
        if act.name == "handle":
            return await self.handler(*act.args)  # type: ignore[misc]
        if act.name == "pause":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), *act.args)
            return None
        return await getattr(self.queue, act.name)(*act.args, **(act.kwargs or {}))
