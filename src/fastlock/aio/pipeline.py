"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script as a callable)
over any :class:`~fastlock.operations.AsyncRunner`: the awaited forms of
:mod:`fastlock.sync.pipeline`."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from ..exceptions import ArgumentError, ResponseError
from ..operations import AsyncRunner
from ..protocol.commands import refuse_connection_state
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.errors import lua_error
from ..scripts.registry import Script, ScriptRegistry
from ..sync.pipeline import NOT_RUN

__all__ = ["AsyncScriptRunner", "BoundScript", "Pipeline"]


class AsyncScriptRunner(AsyncRunner, Protocol):
    """An asyncio runner of named scripts (:class:`~fastlock.aio.Client`, the cluster client)."""

    scripts: ScriptRegistry
    script_settings: ScriptSettings


class Pipeline:
    """Commands queued with :meth:`execute_command` and script calls with :meth:`call`, sent
    in one write by ``await`` :meth:`execute`; ``async with`` drops what was not sent. The
    same API as the sync :class:`fastlock.Pipeline`."""

    def __init__(self, runner: AsyncScriptRunner) -> None:
        self._runner = runner
        self._commands: list[tuple[Any, ...] | None] = []
        self._calls: list[tuple[Script, Any, Any] | None] = []

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute
        <fastlock.aio.Client.execute>`); returns the pipeline so calls can be chained."""
        if not args:
            raise ArgumentError("a command needs at least its name")
        refuse_connection_state(args)
        self._commands.append(args)
        self._calls.append(None)
        return self

    def call(self, name: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Pipeline:
        """Queue a call of script ``name`` with ``keys`` and ``args`` (an unknown name is
        refused here, an argument of a type fastlock does not send by :meth:`execute`, before
        anything is sent); returns the pipeline so calls can be chained. Its reply is the
        script's, as :meth:`Client.call <fastlock.aio.Client.call>` returns it; see
        :meth:`fastlock.Pipeline.call`."""
        script = self._runner.scripts.get(name)
        keys = keys if type(keys) in (tuple, list) else tuple(keys)
        args = args if type(args) in (tuple, list) else tuple(args)
        self._commands.append(None)
        self._calls.append((script, keys, args))
        return self

    def __len__(self) -> int:
        return len(self._commands)

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands and calls and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        commands, calls = self._commands, self._calls
        self._commands, self._calls = [], []
        if not commands:
            return []
        runner = self._runner
        settings = runner.script_settings
        for i, call in enumerate(calls):
            if call is not None:
                script, keys, args = call
                if script.meta:
                    if settings.server_version is None and "server_version" in script.meta:
                        await runner.run(read_server_version(settings))
                    args = [*args, *meta_values(script, settings)]
                commands[i] = ("EVALSHA", script.sha, len(keys), *keys, *args)
        replies = await runner.execute_many(commands)  # type: ignore[arg-type]
        errors = [i for i, reply in enumerate(replies) if isinstance(reply, ResponseError)]
        for i in errors:
            call = calls[i]
            if call is not None:
                replies[i] = await self._script_reply(*call, replies[i])
        if raise_on_error:
            for i in errors:
                if isinstance(replies[i], ResponseError):
                    raise replies[i]
        return replies

    async def _script_reply(self, script: Script, keys: Any, args: Any, error: ResponseError) -> Any:
        """The reply of a pipelined call of ``script`` that got error reply ``error``."""
        if not isinstance(error, NOT_RUN):
            return lua_error(error, script)
        try:
            return await self._runner.call(script.name, keys, args)
        except ResponseError as exc:
            return exc

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._commands, self._calls = [], []


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
