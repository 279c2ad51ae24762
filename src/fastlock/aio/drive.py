"""Run an :data:`~fastlock.operations.Operation` with awaited calls: the asyncio twin of
:mod:`fastlock.sync.drive` (same semantics; :class:`~fastlock.operations.Sleep` awaits
:func:`asyncio.sleep`)."""

from __future__ import annotations

import asyncio
import functools
from typing import TypeVar

from ..exceptions import ArgumentTypeError
from ..operations import (
    AsyncRunner,
    Blocking,
    Call,
    Command,
    Commands,
    Notice,
    Operation,
    Sleep,
    Step,
    run_plan_async,
)

__all__ = ["drive"]

T = TypeVar("T")


async def _perform(runner: AsyncRunner, step: Step) -> object:
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
        await step.signal.wait(step.timeout)
        return None
    raise ArgumentTypeError(f"an operation yielded {step!r}, not a step")


async def drive(runner: AsyncRunner, operation: Operation[T]) -> T:
    """Run ``operation`` on ``runner`` (:func:`~fastlock.operations.run_plan_async`: results
    sent in, ``Exception`` thrown in, anything else, cancellation included, closes it)."""
    return await run_plan_async(operation, functools.partial(_perform, runner))
