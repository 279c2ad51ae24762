"""``Pipeline`` (commands sent in one write) and ``BoundScript`` (a script as a callable)
over any :class:`~fastlock.operations.AsyncRunner`: the awaited forms of
:mod:`fastlock.sync.pipeline`."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any

from ..exceptions import ArgumentError, ResponseError
from ..operations import AsyncRunner
from ..protocol.commands import refuse_connection_state
from ..scripts.registry import Script

__all__ = ["BoundScript", "Pipeline"]


class Pipeline:
    """Commands queued with :meth:`execute_command` and sent in one write by ``await``
    :meth:`execute`; ``async with`` drops what was not sent."""

    def __init__(self, runner: AsyncRunner) -> None:
        self._runner = runner
        self._commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute
        <fastlock.aio.Client.execute>`); returns the pipeline so calls can be chained."""
        if not args:
            raise ArgumentError("a command needs at least its name")
        refuse_connection_state(args)
        self._commands.append(args)
        return self

    def __len__(self) -> int:
        return len(self._commands)

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        commands, self._commands = self._commands, []
        replies = await self._runner.execute_many(commands)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, ResponseError):
                    raise reply
        return replies

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._commands = []


class BoundScript:
    """A script bound to an asyncio client: ``await bound(keys, args)`` is
    ``await client.call(bound.name, keys, args)``."""

    __slots__ = ("client", "script")

    def __init__(self, client: AsyncRunner, script: Script) -> None:
        self.client = client
        self.script = script

    @property
    def name(self) -> str:
        return self.script.name

    @property
    def sha(self) -> str:
        return self.script.sha

    def __call__(
        self, keys: Sequence[Any] = (), args: Sequence[Any] = (), *, busy_timeout: float | None = None
    ) -> Coroutine[Any, Any, Any]:
        return self.client.call(
            self.script.name, keys, args, busy_timeout=busy_timeout
        )  # no frame of its own

    def __repr__(self) -> str:
        return f"<fastlock.aio.BoundScript {self.script.name} sha={self.script.sha[:12]}>"
