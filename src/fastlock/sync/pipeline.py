"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script
as a callable), both over any :class:`~fastlock.operations.Runner` that runs scripts by name.

A pipeline's queue is the core's ``Batch`` on a :class:`~fastlock.Client` (each call encoded
as it is queued, its EVALSHA head encoded once per script, ``call`` with no Python frame);
:class:`CommandList` on other runners (the commands kept as tuples for ``execute_many``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .._impl import CoreBatch
from ..exceptions import ArgumentError, BusyError, NoScriptError, ResponseError
from ..operations import Runner
from ..protocol.commands import refuse_connection_state
from ..scripts.errors import lua_error
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["NOT_RUN", "BoundScript", "CommandList", "Pipeline", "ScriptRunner"]

NOT_RUN = (NoScriptError, BusyError)
"""Error replies of a script call that did not run: the call is sent again."""


class ScriptRunner(Runner, Protocol):
    """A runner of named scripts (:class:`~fastlock.Client`, the cluster client)."""

    scripts: ScriptRegistry

    def _with_meta(self, script: Script, args: Sequence[Any]) -> list[Any]: ...


class Pipeline:
    """Commands queued with :meth:`execute_command` and script calls with :meth:`call`, sent
    in one write by :meth:`execute`. ``batch(pipeline)`` makes its queue and ``send(queue)``
    sends it, returning the replies (default: a :class:`CommandList` sent by the runner's
    ``execute_many``)."""

    def __init__(
        self,
        runner: ScriptRunner,
        batch: Callable[[Pipeline], CoreBatch] | None = None,
        send: Callable[[Any], list[Any]] | None = None,
    ) -> None:
        self._runner = runner
        self._batch: CoreBatch = CommandList(runner, self) if batch is None else batch(self)
        self._send = send or _execute_many(runner)
        if type(self).call is Pipeline.call:
            vars(self)["call"] = self._batch.call  # the same arguments and reply, no Python frame

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute <fastlock.Client.execute>`);
        returns the pipeline so calls can be chained."""
        if not args:
            raise ArgumentError("a command needs at least its name")
        refuse_connection_state(args)
        self._batch.command(args)
        return self

    def call(self, name: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Pipeline:
        """Queue a call of script ``name`` with ``keys`` and ``args`` (``EVALSHA``; an invalid
        argument is refused here); returns the pipeline so calls can be chained.

        Its reply is the script's, as :meth:`Client.call <fastlock.Client.call>` returns it;
        an error reply becomes its :class:`~fastlock.LuaError` report. A call the server did
        not run (``NOSCRIPT``: the script is not loaded; ``BUSY``) is sent again by
        ``Client.call`` once the pipeline's replies are read, so it runs after the rest of the
        pipeline. Pipelined calls are not counted in :meth:`script_stats
        <fastlock.Client.script_stats>`.
        """
        self._batch.call(name, keys, args)
        return self

    def __len__(self) -> int:
        return len(self._batch)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """Send the queued commands and calls and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances.
        """
        batch = self._batch
        if not len(batch):
            return []
        try:
            replies = self._send(batch)
            errors = batch.errors(replies)
            for i in errors:
                call = batch.call_at(i)
                if call is not None:
                    replies[i] = self._script_reply(*call, replies[i])
        finally:
            batch.clear()
        if raise_on_error:
            for i in errors:
                if isinstance(replies[i], ResponseError):
                    raise replies[i]
        return replies

    def _script_reply(self, script: Script, keys: Any, args: Any, error: ResponseError) -> Any:
        """The reply of a pipelined call of ``script`` that got error reply ``error``."""
        if not isinstance(error, NOT_RUN):
            return lua_error(error, script)
        try:
            return self._runner.call(script.name, keys, args)
        except ResponseError as exc:
            return exc

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._batch.clear()


class CommandList:
    """A pipeline's queue on any :class:`ScriptRunner`: commands as tuples, a script call as
    its ``EVALSHA`` command (the meta values appended), sent by ``runner.execute_many``; the
    same methods as the core's ``Batch``, ``call`` and ``command`` returning ``owner``."""

    def __init__(self, runner: ScriptRunner, owner: Any) -> None:
        self._runner = runner
        self._owner = owner
        self.commands: list[tuple[Any, ...]] = []
        self._calls: list[tuple[Script, Any, Any] | None] = []

    def __len__(self) -> int:
        return len(self.commands)

    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any:
        script = self._runner.scripts.get(name)
        keys = keys if type(keys) in (tuple, list) else tuple(keys)
        args = args if type(args) in (tuple, list) else tuple(args)
        sent = self._runner._with_meta(script, args) if script.meta else args
        self.commands.append(("EVALSHA", script.sha, len(keys), *keys, *sent))
        self._calls.append((script, keys, args))
        return self._owner

    def command(self, args: tuple[Any, ...]) -> Any:
        self.commands.append(args)
        self._calls.append(None)
        return self._owner

    def call_at(self, i: int) -> tuple[Script, Any, Any] | None:
        return self._calls[i]

    def errors(self, replies: list[Any]) -> list[int]:
        return [i for i, reply in enumerate(replies) if isinstance(reply, ResponseError)]

    def clear(self) -> None:
        self.commands, self._calls = [], []


def _execute_many(runner: Runner) -> Callable[[Any], list[Any]]:
    return lambda queue: runner.execute_many(queue.commands)


class BoundScript(functools.partial[Any]):
    """A script bound to a client: ``bound(keys=(), args=(), *, busy_timeout=None)`` is
    ``client.call(bound.name, keys, args, busy_timeout=busy_timeout)``. It is that call with
    the name bound (a :func:`functools.partial` of the client's ``call``), so no Python frame
    runs between the caller and the core's ``ScriptCaller.call``."""

    __slots__ = ("client", "script")
    client: Runner
    script: Script

    def __new__(cls, client: Runner, script: Script) -> BoundScript:
        bound = super().__new__(cls, client.call, script.name)
        bound.client = client
        bound.script = script
        return bound

    @property
    def name(self) -> str:
        return self.script.name

    @property
    def sha(self) -> str:
        return self.script.sha

    def __repr__(self) -> str:
        return f"<fastlock.BoundScript {self.script.name} sha={self.script.sha[:12]}>"
