"""Turn error replies of script calls into :class:`~fastlock.LuaError` reports.

Formats understood (the exact texts, per server, are in ``tests/test_lua_errors.py``):

- Redis 7.x / Valkey: ``<CODE> <message> script: <sha>, on @user_script:<N>.`` (Valkey
  leaves out ``<sha>``; functions say ``@user_function``). A Lua error (``error("x")``, a
  runtime error) reads ``ERR user_script:<N>: x ...``; a refused command keeps the
  server's code (``WRONGTYPE ...``) and has no position in the message.
- Redis 6.x: ``ERR Error running script (call to f_<sha>): @user_script:<N>: <inner>``,
  where ``<inner>`` is ``user_script:<N>: x`` for a Lua error, ``@user_script: <N>: x``
  for a command rejected before running, or the server's own error text (its code is
  recovered from there: Redis 6 replies ``ERR``).
- Compile errors (all versions): ``ERR Error compiling script (new function):
  user_script:<N>: ...`` (``Error compiling function:`` for ``FUNCTION LOAD``).

Kinds: :class:`~fastlock.LuaRaisedError` (the script failed by itself, including errors
*returned* with ``redis.error_reply``, which carry no position),
:class:`~fastlock.LuaCommandError` (an error with a position whose code is one the server
gives to commands, :data:`COMMAND_ERROR_CODES`, and no Lua position in the message), and
:class:`~fastlock.LuaCompileError`. A script raising ``error({err="WRONGTYPE x"})`` or
``error("x", 0)`` is indistinguishable from a refusal and counts as one: scripts should
raise their own codes. Rendered lines are mapped through the script's source map, also
inside the message (``user_script:3`` becomes ``shared/_x.lua:1``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from .exceptions import (
    LuaCommandError,
    LuaCompileError,
    LuaError,
    LuaRaisedError,
    ResponseError,
)

if TYPE_CHECKING:
    from .scripts import Script
    from .templates import SourceFile

__all__ = ["COMMAND_ERROR_CODES", "Failure", "context_block", "lua_error", "parse"]

COMMAND_ERROR_CODES = frozenset(
    {
        "ERR",
        "WRONGTYPE",
        "OOM",
        "NOPERM",
        "READONLY",
        "LOADING",
        "MISCONF",
        "NOREPLICAS",
        "MASTERDOWN",
        "BUSYKEY",
        "BUSYGROUP",
        "NOGROUP",
        "CROSSSLOT",
        "TRYAGAIN",
        "CLUSTERDOWN",
    }
)
"""Codes the server gives a command refused inside a script. ``NOSCRIPT``, ``BUSY`` and
the other codes a script cannot meet from ``redis.call`` count as raised by the script."""

_SUFFIX = re.compile(r" script: (?:[^,\s]+, )?on @user_(?:script|function):(?P<line>\d+)\.$")
_V6 = re.compile(
    r"^ERR Error running script \(call to [^)]*\): @(?P<chunk>\w+):(?P<line>\d+): (?P<rest>.*)$", re.S
)
_COMPILE = re.compile(
    r"^ERR Error compiling (?:script \([^)]*\)|function): @?user_(?:script|function):(?P<line>\d+): "
    r"(?P<message>.*)$",
    re.S,
)
_LUA_POSITION = re.compile(r"^user_(?:script|function):(?P<line>\d+): (?P<message>.*)$", re.S)
_V6_PUSHED = re.compile(r"^@user_(?:script|function): (?P<line>\d+): (?P<message>.*)$", re.S)
_CODE = re.compile(r"^(?P<code>[A-Z][A-Z0-9_]*) (?P<message>.*)$", re.S)
_ANY_POSITION = re.compile(r"@?user_(?:script|function):(?P<line>\d+)")


class Failure(NamedTuple):
    """How a script failed: the exception class, code, message and rendered line."""

    error: type[LuaError]
    code: str
    message: str
    line: int | None


def _split_code(text: str) -> tuple[str, str]:
    match = _CODE.match(text)
    return (match["code"], match["message"]) if match else ("", text)


def _classified(code: str, message: str, line: int | None) -> Failure:
    """An error without a Lua position: a refused command if its code says so."""
    error = LuaCommandError if code in COMMAND_ERROR_CODES else LuaRaisedError
    return Failure(error, code, message, line)


def parse(text: str) -> Failure | None:
    """How a script failed, from the server's reply; ``None`` when the reply carries no
    script position (the server refused the call itself, or the script *returned* it)."""
    text = text.rstrip()  # Redis 6 ends its script errors with a space
    if match := _COMPILE.match(text):
        return Failure(LuaCompileError, "ERR", match["message"], int(match["line"]))
    if match := _V6.match(text):
        outer = int(match["line"]) if match["chunk"] in ("user_script", "user_function") else None
        rest = match["rest"]
        if inner := _LUA_POSITION.match(rest):
            return Failure(LuaRaisedError, "ERR", inner["message"], int(inner["line"]))
        if inner := _V6_PUSHED.match(rest):
            return Failure(LuaCommandError, "ERR", inner["message"], int(inner["line"]))
        return _classified(*_split_code(rest), outer)
    if match := _SUFFIX.search(text):
        code, message = _split_code(text[: match.start()])
        if inner := _LUA_POSITION.match(message):
            return Failure(LuaRaisedError, code, inner["message"], int(inner["line"]))
        return _classified(code, message, int(match["line"]))
    return None


def context_block(file: SourceFile, line: int, around: int = 2) -> str:
    """``around`` lines either side of ``line`` in ``file``, numbers aligned, ``line`` marked."""
    first, last = max(1, line - around), min(len(file.lines), line + around)
    width = len(str(last))
    return "\n".join(
        f"  {'=>' if number == line else '  '} {number:>{width}} | {file.lines[number - 1]}".rstrip()
        for number in range(first, last + 1)
    )


def lua_error(exc: ResponseError, script: Script) -> ResponseError:
    """The exception to raise for error reply ``exc`` of a call to ``script``.

    Errors the server gave instead of running the script (a typed error such as
    ``READONLY``, or ``ERR`` without a script position) come back unchanged.
    """
    failure = parse(exc.text)
    if failure is None:
        if type(exc) is not ResponseError or exc.code == "ERR":
            return exc
        failure = Failure(LuaRaisedError, exc.code, exc.message, None)
    lines = len(script.rendered.origins)
    origin = script.origin(min(failure.line, lines)) if failure.line else None

    def relabel(match: re.Match[str]) -> str:
        found = script.origin(int(match["line"]))
        return f"{found[0].name}:{found[1]}" if found else match[0]

    file, line = origin if origin else (None, None)
    return failure.error(
        exc.text,
        script=script.name,
        sha=script.sha,
        file=file.where if file else None,
        line=line,
        rendered_line=failure.line,
        code=failure.code,
        message=_ANY_POSITION.sub(relabel, failure.message),
        context=context_block(file, line) if file and line else "",
    )
