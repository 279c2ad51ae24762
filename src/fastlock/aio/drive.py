"""Run an :data:`~fastlock.operations.Operation`: each step's call made, its result sent in
(``aio/drive.py`` awaits them and is the source of ``sync/drive.py``)."""

from __future__ import annotations

import functools
from typing import TypeVar

from ..exceptions import ArgumentTypeError
from ..operations import (
    AsyncRunner,
    Blocking,
    Call,
    Command,
    Commands,
    Listen,
    Notice,
    Operation,
    Sleep,
    Step,
    run_plan_async,
)

if True:  # ASYNC
    import asyncio
else:
    import time  # noqa: F401

__all__ = ["drive", "perform"]

T = TypeVar("T")


async def perform(runner: AsyncRunner, step: Step) -> object:
    """Make ``step`` on ``runner``; its result."""
    if type(step) is Call:
        return await runner.call(step.name, step.keys, step.args, busy_timeout=step.busy_timeout)
    if type(step) is Command:
        return await runner.execute(*step.args)
    if type(step) is Blocking:
        return await runner.execute_blocking(*step.args, timeout=step.timeout)
    if type(step) is Commands:
        return await runner.execute_many(step.commands)
    if type(step) is Sleep:
        await asyncio.sleep(step.seconds)
        return None
    if type(step) is Notice:
        return await step.signal.wait(step.timeout)
    if type(step) is Listen:
        return await step.listener.listen(step.channel, step.job)
    raise ArgumentTypeError(f"an operation yielded {step!r}, not a step")


async def drive(runner: AsyncRunner, operation: Operation[T]) -> T:
    """Run ``operation`` on ``runner`` (:func:`~fastlock.operations.run_plan_async`: results
    sent in, ``Exception`` thrown in, anything else closes it: cancellation too)."""
    return await run_plan_async(operation, functools.partial(perform, runner))
