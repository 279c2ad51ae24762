# generated from src/fastlock/aio/drive.py by tools/async_to_sync.py, do not edit
"""Run an :data:`~fastlock.operations.Operation`: each step's call made, its result sent in
(``aio/drive.py`` awaits them and is the source of ``sync/drive.py``)."""

from __future__ import annotations

import functools
import time
from typing import TypeVar

from ..exceptions import ArgumentTypeError
from ..operations import (
    Blocking,
    Call,
    Command,
    Commands,
    Listen,
    Notice,
    Operation,
    Runner,
    Sleep,
    Step,
    run_plan,
)

__all__ = ["drive", "perform"]

T = TypeVar("T")


def perform(runner: Runner, step: Step) -> object:
    """Make ``step`` on ``runner``; its result."""
    if type(step) is Call:
        return runner.call(step.name, step.keys, step.args, busy_timeout=step.busy_timeout)
    if type(step) is Command:
        return runner.execute(*step.args)
    if type(step) is Blocking:
        return runner.execute_blocking(*step.args, timeout=step.timeout)
    if type(step) is Commands:
        return runner.execute_many(step.commands)
    if type(step) is Sleep:
        time.sleep(step.seconds)
        return None
    if type(step) is Notice:
        return step.signal.wait(step.timeout)
    if type(step) is Listen:
        return step.listener.listen(step.channel, step.job)
    raise ArgumentTypeError(f"an operation yielded {step!r}, not a step")


def drive(runner: Runner, operation: Operation[T]) -> T:
    """Run ``operation`` on ``runner`` (:func:`~fastlock.operations.run_plan`: results
    sent in, ``Exception`` thrown in, anything else closes it: cancellation too)."""
    return run_plan(operation, functools.partial(perform, runner))
