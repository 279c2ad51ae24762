"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script as a callable)
over any :class:`~fastlock.operations.AsyncRunner`: the awaited forms of
:mod:`fastlock.sync.pipeline`."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..exceptions import ResponseError
from ..operations import AsyncRunner
from ..protocol.commands import refuse_connection_state
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.pipelined import CallQueue, ScriptBinding, calls_to_send_again, raise_first
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["AsyncScriptRunner", "BoundScript", "Pipeline"]


class AsyncScriptRunner(AsyncRunner, Protocol):
    """An asyncio runner of named scripts (:class:`~fastlock.aio.Client`, the cluster client)."""

    scripts: ScriptRegistry
    script_settings: ScriptSettings


class Pipeline(AbstractAsyncContextManager["Pipeline"]):
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
        refuse_connection_state(args, queued=True)
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

    async def execute(self, raise_on_error: bool = True, *, allow_reorder: bool = False) -> list[Any]:
        """Send the queued commands and calls and return their replies in order (see
        :meth:`fastlock.Pipeline.execute`: a call the server did not run after which queued
        commands ran is a :class:`~fastlock.ScriptNotRunError`, unless ``allow_reorder``).

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        commands, calls = self._commands, self._calls
        self._commands, self._calls = [], []
        if not commands:
            return []
        queue = _Sent(self._runner, calls)
        await queue.prepare(commands)
        replies = await self._runner.execute_many(commands)  # type: ignore[arg-type]
        errors = queue.errors(replies)
        for i, script, keys, args in calls_to_send_again(queue, replies, errors, allow_reorder):
            try:
                replies[i] = await self._runner.call(script.name, keys, args)
            except ResponseError as exc:
                replies[i] = exc
        if raise_on_error and errors:
            raise_first(replies, errors)
        return replies

    async def __aexit__(self, *exc_info: object) -> None:
        self._commands, self._calls = [], []


class _Sent(CallQueue):
    """The calls of a pipeline being sent: their commands (``EVALSHA``, or ``EVAL`` first for
    a script not seen loaded on its node) and the queue methods :func:`calls_to_send_again` reads."""

    def __init__(self, runner: AsyncScriptRunner, calls: list[tuple[Script, Any, Any] | None]) -> None:
        super().__init__(runner, calls, [None] * len(calls))

    async def prepare(self, commands: list[tuple[Any, ...] | None]) -> None:
        runner = self._runner
        settings = runner.script_settings
        home_of = self._home_of
        for i, call in enumerate(self._calls):
            if call is None:
                continue
            script, keys, args = call
            if script.meta:
                if settings.server_version is None and "server_version" in script.meta:
                    await runner.run(read_server_version(settings))
                args = [*args, *meta_values(script, settings)]
            node = await home_of(keys) if home_of else ()
            commands[i] = self.script_call(i, script, keys, args, node)


class BoundScript(ScriptBinding):
    """A script bound to an asyncio client: ``await bound(keys, args)`` is
    ``await client.call(bound.name, keys, args)``."""

    __slots__ = ("client", "script")
    kind = "fastlock.aio.BoundScript"

    def __init__(self, client: AsyncRunner, script: Script) -> None:
        self.client = client
        self.script = script

    def __call__(
        self, keys: Sequence[Any] = (), args: Sequence[Any] = (), *, busy_timeout: float | None = None
    ) -> Coroutine[Any, Any, Any]:
        return self.client.call(
            self.script.name, keys, args, busy_timeout=busy_timeout
        )  # no frame of its own
