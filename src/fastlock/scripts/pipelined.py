"""What the sync and asyncio pipelines share about their script calls (sans-IO): a pipeline
keeps its order (docs/delivery.md, "A pipeline keeps its order").

The first call of a script a runner's pipelines have not seen loaded where it goes is sent
as ``EVAL`` (:func:`script_command`), loading it in its place; :func:`settle` records what
the replies tell (loaded by that ``EVAL``; flushed, after a ``NOSCRIPT``) in
:func:`pipelined_scripts` (the Cython core's ``Batch`` keeps the same on its script
entries). A call not run (:data:`NOT_RUN`) is sent again only when nothing after it ran
(:func:`last_run`), else its reply is a :class:`~fastlock.ScriptNotRunError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from ..exceptions import BusyError, LuaCompileError, LuaError, NoScriptError, ResponseError, ScriptNotRunError
from ..operations import Call, Operation
from .errors import lua_error
from .registry import Script

__all__ = [
    "NOT_RUN",
    "CallQueue",
    "ScriptBinding",
    "last_run",
    "pipelined_scripts",
    "script_command",
    "script_home",
    "settle",
    "settle_replies",
]

NOT_RUN = (NoScriptError, BusyError)
"""Error replies of a script call (or a command) the server did not run."""


def script_command(script: Script, keys: Sequence[Any], args: Sequence[Any], first: bool) -> tuple[Any, ...]:
    """The command of a pipelined call: ``EVALSHA``, or ``EVAL`` with the body when ``first``
    (the first call of a script not seen loaded on its node), which loads it where it runs."""
    if first:
        return ("EVAL", script.body, len(keys), *keys, *args)
    return ("EVALSHA", script.sha, len(keys), *keys, *args)


def script_home(node: Any, script: Script) -> tuple[Any, str] | None:
    """What the pipelines of a runner record as loaded for a call of ``script`` on ``node``
    (the runner's ``_script_home(keys)``, ``()`` for a one-server runner): ``None`` when the
    node is not known in advance (a keyless call on a cluster), which is then always an
    ``EVAL``."""
    return None if node is None else (node, script.sha)


def pipelined_scripts(runner: object) -> set[Any]:
    """``(node, sha)`` of the scripts pipelines saw loaded on ``runner``'s nodes (``node``:
    its ``_script_home(keys)``, ``()`` for a one-server runner)."""
    loaded: set[Any] | None = getattr(runner, "_pipelined_scripts", None)
    if loaded is None:
        loaded = set()
        setattr(runner, "_pipelined_scripts", loaded)  # noqa: B010 - any runner, no declared slot
    return loaded


class _Queue(Protocol):
    def call_at(self, i: int) -> tuple[Script, Any, Any] | None: ...
    def evals(self) -> list[int]: ...
    def set_loaded(self, i: int, loaded: bool) -> None: ...


def settle(queue: _Queue, replies: list[Any], errors: list[int]) -> None:
    """Note what ``replies`` (``errors``: the indices of the error replies) tell of the
    scripts a pipeline's ``queue`` called: loaded by an ``EVAL`` in place, no longer loaded
    after a ``NOSCRIPT``. Called only when there are errors or ``EVAL`` calls (the cached,
    error-free pipeline skips it)."""
    for i in queue.evals():
        queue.set_loaded(i, _loads(replies[i]))
    for i in errors:
        if isinstance(replies[i], NoScriptError):
            queue.set_loaded(i, False)


def _loads(reply: Any) -> bool:
    """Whether the server holds a script after an ``EVAL`` of it got ``reply``: unless it
    did not compile or did not run (``BUSY``, refused)."""
    return not isinstance(reply, ResponseError) or (
        isinstance(reply, LuaError) and not isinstance(reply, LuaCompileError)
    )


def last_run(replies: list[Any]) -> int:
    """The index of the last reply of a command the server ran (``-1``: none): a reply that
    is not ``NOSCRIPT`` or ``BUSY``."""
    for i in range(len(replies) - 1, -1, -1):
        if not isinstance(replies[i], NOT_RUN):
            return i
    return -1


def settle_replies(
    queue: _Queue, replies: list[Any], errors: list[int], raise_on_error: bool, allow_reorder: bool
) -> Operation[None]:
    """Complete a pipeline's ``replies`` (``errors``: the indices of the error replies), as an
    operation: what they tell :func:`settle`d, the reply of each failed script call set in
    place (its :class:`~fastlock.LuaError` report, a :class:`~fastlock.ScriptNotRunError` when
    it was not run and may not be sent again), and the calls not run after which nothing ran
    (any, with ``allow_reorder``) sent again by :class:`~fastlock.operations.Call`, their reply
    or error reply in place; then, with ``raise_on_error``, the first error reply left raised."""
    if errors or queue.evals():
        settle(queue, replies, errors)
    ran = last_run(replies)
    for i in errors:
        call = queue.call_at(i)
        if call is None:
            continue
        script, keys, args = call
        error = replies[i]
        if not isinstance(error, NOT_RUN):
            replies[i] = lua_error(error, script)
        elif i > ran or allow_reorder:
            try:
                replies[i] = yield Call(script.name, keys, args)
            except ResponseError as exc:
                replies[i] = exc
        else:
            replies[i] = ScriptNotRunError(error.text, script=script.name, index=i)
    if raise_on_error:
        _raise_first(replies, errors)


def _raise_first(replies: list[Any], errors: list[int]) -> None:
    """Raise the first error reply left among ``errors`` (a script call's may have been replaced)."""
    for i in errors:
        if isinstance(replies[i], ResponseError):
            raise replies[i]


class CallQueue:
    """The calls of a pipeline on a runner without the core's ``Batch`` (both transports):
    per entry its ``(script, keys, args)`` (``None``: a command) and where it loads (its
    home, :func:`script_home`), the indices of the calls sent as ``EVAL``; the queue methods
    :func:`settle_replies` reads."""

    def __init__(self, runner: Any, calls: list[tuple[Script, Any, Any] | None], homes: list[Any]) -> None:
        self._runner = runner
        self._calls = calls
        self._homes = homes
        self._home_of = getattr(runner, "_script_home", None)
        self._evals: list[int] = []

    def sent_as_eval(self, home: tuple[Any, str] | None) -> bool:
        """Whether the next call to ``home`` is an ``EVAL`` (not seen loaded there, by the
        runner's pipelines or an earlier ``EVAL`` of this one)."""
        return home is None or (
            home not in pipelined_scripts(self._runner) and all(self._homes[i] != home for i in self._evals)
        )

    def script_call(self, i: int, script: Script, keys: Any, args: Any, node: Any) -> tuple[Any, ...]:
        """The command of call ``i`` of ``script`` (``args``: the meta values appended) going to
        ``node`` (the runner's ``_script_home(keys)``, ``()`` for a one-server runner): its
        ``EVALSHA``, or ``EVAL`` when not seen loaded there (noted as one); its home noted."""
        home = script_home(node, script)
        first = self.sent_as_eval(home)
        if first:
            self._evals.append(i)
        self._homes[i] = home
        return script_command(script, keys, args, first)

    def call_at(self, i: int) -> tuple[Script, Any, Any] | None:
        return self._calls[i]

    def errors(self, replies: list[Any]) -> list[int]:
        return [i for i, reply in enumerate(replies) if isinstance(reply, ResponseError)]

    def evals(self) -> list[int]:
        return list(self._evals)

    def set_loaded(self, i: int, loaded: bool) -> None:
        home = self._homes[i]
        if home is not None:
            if loaded:
                pipelined_scripts(self._runner).add(home)
            else:
                pipelined_scripts(self._runner).discard(home)


class ScriptBinding:
    """What both transports' ``BoundScript`` say of the script they bind: its name and sha."""

    __slots__ = ()
    script: Script
    kind: ClassVar[str]
    """The class as ``repr`` names it."""

    @property
    def name(self) -> str:
        return self.script.name

    @property
    def sha(self) -> str:
        return self.script.sha

    def __repr__(self) -> str:
        return f"<{self.kind} {self.script.name} sha={self.script.sha[:12]}>"
