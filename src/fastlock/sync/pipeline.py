"""``Pipeline`` (commands and script calls sent in one write) and ``BoundScript`` (a script
as a callable), both over any :class:`~fastlock.operations.Runner` that runs scripts by name.

A pipeline's queue is the core's ``CommandQueue`` on a :class:`~fastlock.Client` (each call encoded
as it is queued, its EVALSHA head encoded once per script, ``call`` with no Python frame);
:class:`CommandList` on other runners (the commands kept as tuples for ``execute_many``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .._impl import CoreCommandQueue
from ..operations import Runner
from ..protocol.commands import refuse_connection_state
from ..scripts.pipelined import CallQueue, ScriptBinding, settle_replies
from ..scripts.registry import Script, ScriptRegistry

__all__ = ["BoundScript", "CommandList", "Pipeline", "ScriptRunner"]


class ScriptRunner(Runner, Protocol):
    """A runner of named scripts (:class:`~fastlock.Client`, the cluster client)."""

    scripts: ScriptRegistry

    def _with_meta(self, script: Script, args: Sequence[Any]) -> list[Any]: ...


class Pipeline(AbstractContextManager["Pipeline"]):
    """Commands queued with :meth:`execute_command` and script calls with :meth:`call`, sent
    in one write by :meth:`execute`. ``batch(pipeline)`` makes its queue and ``send(queue)``
    sends it, returning the replies (default: a :class:`CommandList` sent by the runner's
    ``execute_many``)."""

    def __init__(
        self,
        runner: ScriptRunner,
        batch: Callable[[Pipeline], CoreCommandQueue] | None = None,
        send: Callable[[Any], list[Any]] | None = None,
    ) -> None:
        self._runner = runner
        self._batch: CoreCommandQueue = CommandList(runner, self) if batch is None else batch(self)
        self._send = send or _execute_many(runner)
        if type(self).call is Pipeline.call:
            vars(self)["call"] = self._batch.call  # the same arguments and reply, no Python frame

    def execute_command(self, *args: Any) -> Pipeline:
        """Queue one command (refused like in :meth:`Client.execute <fastlock.Client.execute>`);
        returns the pipeline so calls can be chained."""
        refuse_connection_state(args, queued=True)
        self._batch.command(args)
        return self

    def call(self, name: str, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Pipeline:
        """Queue a call of script ``name`` with ``keys`` and ``args`` (``EVALSHA``; an invalid
        argument is refused here); returns the pipeline so calls can be chained.

        Its reply is the script's, as :meth:`Client.call <fastlock.Client.call>` returns it;
        an error reply becomes its :class:`~fastlock.LuaError` report. The calls run in the
        order queued: the first call of a script the client has not seen loaded by a pipeline
        is sent as ``EVAL`` (its body, which also loads it) in its place, in the same write.
        A call the server did not run anyway (``NOSCRIPT``: flushed meanwhile; ``BUSY``) is
        sent again by ``Client.call`` when nothing queued after it ran; otherwise its reply is
        a :class:`~fastlock.ScriptNotRunError` (see :meth:`execute`). Pipelined calls are not
        counted in :meth:`script_stats <fastlock.Client.script_stats>`.
        """
        self._batch.call(name, keys, args)
        return self

    def __len__(self) -> int:
        return len(self._batch)

    def execute(self, raise_on_error: bool = True, *, allow_reorder: bool = False) -> list[Any]:
        """Send the queued commands and calls and return their replies in order.

        With ``raise_on_error`` the first error reply is raised once all replies are read;
        otherwise errors are returned in place as ``ResponseError`` instances. A script call
        the server did not run (``NOSCRIPT``, ``BUSY``) after which queued commands ran is
        not sent again (that would run it out of order; a write is never run twice): its
        reply is a :class:`~fastlock.ScriptNotRunError`, unless ``allow_reorder``, which sends
        it again after the rest.
        """
        batch = self._batch
        if not len(batch):
            return []
        try:
            replies = self._send(batch)
            errors = batch.errors(replies)
            if errors or batch.evals():
                self._runner.run(settle_replies(batch, replies, errors, raise_on_error, allow_reorder))
        finally:
            batch.clear()
        return replies

    def __exit__(self, *exc_info: object) -> None:
        self._batch.clear()


class CommandList(CallQueue):
    """A pipeline's queue on any :class:`ScriptRunner`: commands as tuples, a script call as
    its ``EVALSHA`` command (the meta values appended; ``EVAL`` for the first call of a script
    not seen loaded where it goes, see :func:`~fastlock.scripts.pipelined.script_command`), sent by
    ``runner.execute_many``; the same methods as the core's ``CommandQueue``, ``call`` and
    ``command`` returning ``owner``."""

    def __init__(self, runner: ScriptRunner, owner: Any) -> None:
        super().__init__(runner, [], [])
        self._owner = owner
        self.commands: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self.commands)

    def call(self, name: str, keys: Any = (), args: Any = ()) -> Any:
        runner = self._runner
        script = runner.scripts.get(name)
        keys = keys if type(keys) in (tuple, list) else tuple(keys)
        args = args if type(args) in (tuple, list) else tuple(args)
        sent = runner._with_meta(script, args) if script.meta else args
        node = self._home_of(keys) if self._home_of is not None else ()
        self._calls.append((script, keys, args))
        self._homes.append(None)
        self.commands.append(self.script_call(len(self.commands), script, keys, sent, node))
        return self._owner

    def command(self, args: tuple[Any, ...]) -> Any:
        self.commands.append(args)
        self._calls.append(None)
        self._homes.append(None)
        return self._owner

    def clear(self) -> None:
        self.commands, self._calls, self._homes, self._evals = [], [], [], []


def _execute_many(runner: Runner) -> Callable[[Any], list[Any]]:
    return lambda queue: runner.execute_many(queue.commands)


class BoundScript(ScriptBinding, functools.partial[Any]):
    """A script bound to a client: ``bound(keys=(), args=(), *, busy_timeout=None)`` is
    ``client.call(bound.name, keys, args, busy_timeout=busy_timeout)``. It is that call with
    the name bound (a :func:`functools.partial` of the client's ``call``), so no Python frame
    runs between the caller and the core's ``ScriptCaller.call``."""

    __slots__ = ("client", "script")
    client: Runner
    script: Script
    kind = "fastlock.BoundScript"

    def __new__(cls, client: Runner, script: Script) -> BoundScript:
        bound = super().__new__(cls, client.call, script.name)
        bound.client = client
        bound.script = script
        return bound
