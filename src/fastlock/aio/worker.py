"""A worker on asyncio: :class:`AsyncWorker`, the same loop as :class:`~fastlock.queues.worker.Worker`
(the plan of :class:`~fastlock.queues.policy.WorkerBase`: batches, completion, failures,
retries and dead letters, transient errors, recovery, idle waits without polling), awaited.

``concurrency`` loops run as tasks, each with its own batch; one heartbeat task renews
the leases of every job the worker holds (the bookkeeping of
:class:`~fastlock.queues.policy.Leases`). :meth:`AsyncWorker.stop` is graceful: nothing more
is claimed, idle loops are woken, and :meth:`AsyncWorker.run` returns once each loop has
finished its current job (the unstarted rest of its batch handed back at once). A handler
is a coroutine function; one that blocks the event loop also stalls the heartbeat.
``job_timeout`` cancels the handler's task (``asyncio.wait_for``); hooks may be coroutine
functions (awaited); ``run(install_signals=True)`` stops on SIGTERM/SIGINT through the
loop's signal handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Unpack

from ..operations import run_plan_async
from ..queues.jobs import Job
from ..queues.leases import extend
from ..queues.outcomes import JobTimeout
from ..queues.policy import Act, Leases, Plan, WorkerBase, WorkerOptions
from ..queues.signals import SIGNALS, installed
from .queue import AsyncQueue

__all__ = ["AsyncWorker"]


class AsyncWorker(WorkerBase[AsyncQueue]):
    """Run ``await handler(job)`` on the jobs of ``queue`` in ``concurrency`` tasks, ``batch``
    claimed at a time by each; the options and the semantics of
    :class:`~fastlock.queues.worker.Worker` (hooks may be coroutine functions; a handler
    past ``job_timeout`` is cancelled)."""

    _queue_type = AsyncQueue
    _flag_type = asyncio.Event
    _stopping: asyncio.Event

    def __init__(
        self,
        queue: AsyncQueue,
        handler: Callable[[Job], Awaitable[object]],
        **options: Unpack[WorkerOptions],
    ) -> None:
        super().__init__(queue, handler, **options)
        self._leases = Leases()
        self._held = asyncio.Event()  # set when the heartbeat should look again

    async def stop(self) -> None:
        """:meth:`Worker.stop <fastlock.queues.worker.Worker.stop>`, awaited: each loop
        returns after its current job, idle loops at once."""
        await self._drive(self._waking())

    async def run(
        self, *, max_jobs: int | None = None, install_signals: bool = False, schedules: bool = False
    ) -> int:
        """:meth:`Worker.run <fastlock.queues.worker.Worker.run>`, awaited: the number of jobs
        handled. ``install_signals``: SIGTERM and SIGINT call :meth:`stop` (the loop's signal
        handlers, removed at the first signal so a second one acts as it would have, and when
        run returns). ``schedules``: a scheduler task beside the loops (its error is raised)."""
        tally = self._tally(max_jobs)
        beat = asyncio.create_task(self._heartbeat(), name="fastlock-heartbeat")
        stopped, wake = asyncio.Event(), self._interrupts[0] + ":schedules"
        scheduler = None
        if schedules:
            scheduling = self.queue.run_schedules(stop=stopped.is_set, interrupt=wake)
            scheduler = asyncio.create_task(scheduling, name="fastlock-scheduler")
        try:
            with installed(install_signals, self._arm):
                loops = [self._drive(self._looping(tally, self, key)) for key in self._interrupts]
                await asyncio.gather(*loops)
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            if scheduler is not None:
                stopped.set()
                await self.queue.interrupt(wake)
                await scheduler
        return tally.handled

    def _arm(self) -> Callable[[], None]:
        """The loop's signal handlers, removed at the first signal (or when run returns)."""
        loop = asyncio.get_running_loop()
        stopping: list[asyncio.Task[None]] = []

        def disarm() -> None:
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)

        def graceful() -> None:
            disarm()
            self._stopping.set()
            stopping.append(loop.create_task(self.stop()))

        for sig in SIGNALS:
            loop.add_signal_handler(sig, graceful)
        return disarm

    # the leases of every loop, renewed by the heartbeat task
    def hold(self, queue: AsyncQueue, jobs: list[Job]) -> None:
        self._leases.hold(queue, jobs)
        self._held.set()

    def release(self, queue: AsyncQueue, jobs: list[Job]) -> None:
        self._leases.release(queue, jobs)

    async def _heartbeat(self) -> None:
        while True:
            due, wait = self._leases.due()
            await run_plan_async(self._leases.renewing(due), extend)
            if not due:
                self._held.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._held.wait(), wait)

    async def _drive(self, plan: Plan) -> None:
        """Run one loop's plan: each act awaited, its result sent in, its ``Exception``
        thrown in; anything else (cancellation, ...) closes it."""
        await run_plan_async(plan, self._perform)

    async def _perform(self, act: Act) -> Any:
        if act.name == "handle":
            timeout = act.kwargs["timeout"] if act.kwargs else None
            running: Awaitable[Any] = self.handler(*act.args)  # type: ignore[assignment]
            if timeout is None:
                return await running
            return await _within(running, timeout, act.args[0])
        if act.name == "call":
            result = act.args[0](*act.args[1:])
            return await result if inspect.isawaitable(result) else result
        if act.name == "pause":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), *act.args)
            return None
        return await getattr(self.queue, act.name)(*act.args, **(act.kwargs or {}))


async def _within(running: Awaitable[Any], timeout: float, job: Job) -> Any:
    """``running``'s result, or :class:`JobTimeout` once it ran ``timeout`` seconds (then
    cancelled); a ``TimeoutError`` of the handler's own stays its own."""
    task = asyncio.ensure_future(running)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if not done:
        raise JobTimeout(f"job {job.id} ran past its {timeout} s timeout (cancelled)")
    return task.result()
