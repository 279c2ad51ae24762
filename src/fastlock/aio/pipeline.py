"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script as a callable)
over any :class:`~fastlock.operations.AsyncRunner`: the awaited forms of
:mod:`fastlock.sync.pipeline`."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from ..operations import AsyncRunner
from ..protocol.commands import refuse_connection_state
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.pipelined import CallQueue, ScriptBinding, settle_replies
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["AsyncScriptRunner", "BoundScript", "Pipeline"]


class AsyncScriptRunner(AsyncRunner, Protocol):
    """An asyncio runner of named scripts (:class:`~fastlock.aio.Client`, the cluster client)."""

    scripts: ScriptRegistry
    script_settings: ScriptSettings


class Pipeline(AbstractAsyncContextManager["Pipeline"]):
    """The asyncio form of :class:`fastlock.Pipeline`, the same API: ``await`` :meth:`execute`
    sends what :meth:`execute_command` and :meth:`call` queued, in one write; ``async with``
    drops what was not sent."""

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
        """:meth:`fastlock.Pipeline.execute`, awaited: the replies in order, the first error
        reply raised (``raise_on_error``) or errors in place; a call the server did not run
        after which queued commands ran is a :class:`~fastlock.ScriptNotRunError`, unless
        ``allow_reorder``."""
        commands, calls = self._commands, self._calls
        self._commands, self._calls = [], []
        if not commands:
            return []
        queue = _Sent(self._runner, calls)
        await queue.prepare(commands)
        replies = await self._runner.execute_many(commands)  # type: ignore[arg-type]
        errors = queue.errors(replies)
        if errors or queue.evals():
            await self._runner.run(settle_replies(queue, replies, errors, raise_on_error, allow_reorder))
        return replies

    async def __aexit__(self, *exc_info: object) -> None:
        self._commands, self._calls = [], []


class _Sent(CallQueue):
    """The calls of a pipeline being sent: their commands (``EVALSHA``, or ``EVAL`` first for
    a script not seen loaded on its node) and the queue methods :func:`settle_replies` reads."""

    def __init__(self, runner: AsyncScriptRunner, calls: list[tuple[Script, Any, Any] | None]) -> None:
        super().__init__(runner, calls, [None] * len(calls))

    async def prepare(self, commands: list[tuple[Any, ...] | None]) -> None:
        settings = self._runner.script_settings
        home_of = self._home_of
        for i, call in enumerate(self._calls):
            if call is None:
                continue
            script, keys, args = call
            if script.meta:
                if settings.server_version is None and "server_version" in script.meta:
                    await self._runner.run(read_server_version(settings))
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
