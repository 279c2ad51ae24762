"""Run an :data:`~fastlock.operations.Operation` with awaited calls: the asyncio twin of
:mod:`fastlock.sync.drive` (same semantics; :class:`~fastlock.operations.Sleep` awaits
:func:`asyncio.sleep`)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from ..operations import AsyncRunner, Blocking, Call, Command, Commands, Operation, Sleep, Step

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
    raise TypeError(f"an operation yielded {step!r}, not a step")


async def drive(runner: AsyncRunner, operation: Operation[T]) -> T:
    """Run ``operation`` on ``runner``: each step's result is sent in, its ``Exception`` thrown
    in (the operation may handle it); anything else (cancellation, ...) closes it."""
    result: object = None
    failure: Exception | None = None
    while True:
        try:
            step = operation.send(result) if failure is None else operation.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            failure = None  # not kept alive in a frame a traceback can reach
        try:
            result = await _perform(runner, step)
        except Exception as exc:  # noqa: BLE001 - thrown into the operation, which decides
            failure, result = exc, None
        except BaseException:
            operation.close()
            raise
