"""``Pipeline`` (commands sent in one write) and ``BoundScript`` (a script as a callable),
both over any :class:`~fastlock.operations.Runner`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..exceptions import ResponseError
from ..operations import Runner
from ..protocol.commands import refuse_connection_state
from ..scripts.registry import Script

__all__ = ["BoundScript", "Pipeline"]


class Pipeline:
    """Commands queued with :meth:`execute_command` and sent in one write by :meth:`execute`."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute <fastlock.Client.execute>`);
        returns the pipeline so calls can be chained."""
        if not args:
            raise ValueError("a command needs at least its name")
        refuse_connection_state(args)
        self._commands.append(args)
        return self

    def __len__(self) -> int:
        return len(self._commands)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        commands, self._commands = self._commands, []
        replies = self._runner.execute_many(commands)
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, ResponseError):
                    raise reply
        return replies

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._commands = []


class BoundScript:
    """A script bound to a client: ``bound(keys, args)`` is ``client.call(bound.name, keys, args)``."""

    __slots__ = ("client", "script")

    def __init__(self, client: Runner, script: Script) -> None:
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
    ) -> Any:
        return self.client.call(self.script.name, keys, args, busy_timeout=busy_timeout)

    def __repr__(self) -> str:
        return f"<fastlock.BoundScript {self.script.name} sha={self.script.sha[:12]}>"
