"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script as a callable)
over any :class:`~fastlock.operations.AsyncRunner`: the awaited forms of
:mod:`fastlock.sync.pipeline`."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, Protocol

from ..exceptions import ArgumentError, ResponseError, ScriptNotRunError
from ..operations import AsyncRunner
from ..protocol.commands import refuse_connection_state
from ..scripts.calling import ScriptSettings, meta_values, read_server_version
from ..scripts.errors import lua_error
from ..scripts.pipelined import NOT_RUN, last_run, pipelined_scripts, script_command, script_home, settle
from ..scripts.registry import Script, ScriptRegistry

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
        if errors or queue.evals():
            settle(queue, replies, errors)
        if errors:
            ran = last_run(replies)
            for i in errors:
                call = calls[i]
                if call is not None:
                    replies[i] = await self._script_reply(i, *call, replies[i], i > ran or allow_reorder)
        if raise_on_error:
            for i in errors:
                if isinstance(replies[i], ResponseError):
                    raise replies[i]
        return replies

    async def _script_reply(
        self, i: int, script: Script, keys: Any, args: Any, error: ResponseError, again: bool
    ) -> Any:
        """The reply of pipelined call ``i`` of ``script`` that got error reply ``error``
        (``again``: it may be sent again)."""
        if not isinstance(error, NOT_RUN):
            return lua_error(error, script)
        if not again:
            return ScriptNotRunError(error.text, script=script.name, index=i)
        try:
            return await self._runner.call(script.name, keys, args)
        except ResponseError as exc:
            return exc

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._commands, self._calls = [], []


class _Sent:
    """The calls of a pipeline being sent: their commands (``EVALSHA``, or ``EVAL`` first for
    a script not seen loaded on its node) and the queue methods :func:`settle` reads."""

    def __init__(self, runner: AsyncScriptRunner, calls: list[tuple[Script, Any, Any] | None]) -> None:
        self._runner = runner
        self._calls = calls
        self._homes: list[Any] = [None] * len(calls)
        self._evals: list[int] = []

    async def prepare(self, commands: list[tuple[Any, ...] | None]) -> None:
        runner = self._runner
        settings = runner.script_settings
        loaded = pipelined_scripts(runner)
        home_of = getattr(runner, "_script_home", None)
        for i, call in enumerate(self._calls):
            if call is None:
                continue
            script, keys, args = call
            if script.meta:
                if settings.server_version is None and "server_version" in script.meta:
                    await runner.run(read_server_version(settings))
                args = [*args, *meta_values(script, settings)]
            home = script_home(await home_of(keys) if home_of is not None else (), script)
            first = home is None or (home not in loaded and all(self._homes[j] != home for j in self._evals))
            if first:
                self._evals.append(i)
            self._homes[i] = home
            commands[i] = script_command(script, keys, args, first)

    def call_at(self, i: int) -> tuple[Script, Any, Any] | None:
        return self._calls[i]

    def errors(self, replies: list[Any]) -> list[int]:
        return [i for i, reply in enumerate(replies) if isinstance(reply, ResponseError)]

    def evals(self) -> list[int]:
        return self._evals

    def set_loaded(self, i: int, loaded: bool) -> None:
        home = self._homes[i]
        if home is not None:
            if loaded:
                pipelined_scripts(self._runner).add(home)
            else:
                pipelined_scripts(self._runner).discard(home)


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
