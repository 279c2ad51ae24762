"""Turn error replies of script calls into :class:`~fastlock.LuaError` reports.

The reply is classified where it is read (:func:`fastlock.protocol.replies.parse`: the formats
of Redis 6, Redis 7 and Valkey); here its rendered line is mapped through the script's
source map to the template file and line, also inside the message
(``user_script:3`` becomes ``shared/_x.lua:1``), with the lines around it.

Kinds: :class:`~fastlock.LuaRaisedError` (the script failed by itself, including errors
*returned* with ``redis.error_reply``, which carry no position),
:class:`~fastlock.LuaCommandError` (an error with a position whose code is one the server
gives to commands, and no Lua position in the message; ``READONLY``, ``OOM`` and
``WRONGTYPE`` get the subclasses that are also :class:`~fastlock.ReadOnlyError`, ...),
and :class:`~fastlock.LuaCompileError`. A script raising ``error({err="WRONGTYPE x"})``
or ``error("x", 0)`` is indistinguishable from a refusal and counts as one: scripts
should raise their own codes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..exceptions import LuaCompileError, LuaError, LuaRaisedError, ResponseError
from ..protocol.replies import ANY_POSITION

if TYPE_CHECKING:
    from .registry import Script
    from .templates import SourceFile

__all__ = ["context_block", "lua_error"]


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
    if isinstance(exc, LuaError):
        error, rendered_line = type(exc), exc.rendered_line
    elif type(exc) is ResponseError and exc.code != "ERR":
        error, rendered_line = LuaRaisedError, None
    else:
        return exc
    at = rendered_line
    if at and error is LuaCompileError:  # at '<eof>': past the last line
        at = min(at, len(script.rendered.origins))
    origin = script.origin(at) if at else None

    def relabel(match: re.Match[str]) -> str:
        found = script.origin(int(match["line"]))
        return f"{found[0].name}:{found[1]}" if found else match[0]

    file, line = origin if origin else (None, None)
    return error(
        exc.text,
        script=script.name,
        sha=script.sha,
        file=file.where if file else None,
        line=line,
        rendered_line=rendered_line,
        code=exc.code,
        message=ANY_POSITION.sub(relabel, exc.message),
        context=context_block(file, line) if file and line else "",
    )
