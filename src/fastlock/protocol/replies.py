"""Classify server error replies: the typed exception for each reply text.

An error reply's *code word* (its first token, e.g. ``NOSCRIPT``) picks its class from
:data:`fastlock.exceptions.CODES`. An error raised while a Lua script ran carries the
Redis 7 suffix `` script: <sha>, on @user_script:<line>.`` (or the Redis 6 ``Error running
script`` wording) and becomes a :class:`~fastlock.LuaError` whatever its first word is;
``NOSCRIPT`` and ``BUSY`` are recognised only in the server's own wording. Both cores
build their error replies with :func:`response_error`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..exceptions import (
    CODES,
    LuaCommandError,
    LuaCompileError,
    LuaError,
    LuaRaisedError,
    ResponseError,
)

__all__ = ["ANY_POSITION", "COMMAND_ERROR_CODES", "Failure", "parse", "response_error"]

# Formats of script errors (exact texts: notes/redis-facts.md §6):
# - Redis 7.x / Valkey: "<CODE> <message> script: <sha>, on @user_script:<N>." (Valkey
#   leaves out <sha>; functions say @user_function). A Lua error reads
#   "ERR user_script:<N>: x ..."; a refused command keeps the server's code
#   ("WRONGTYPE ...", "READONLY ...") and has no position in the message.
# - Redis 6.x: "ERR Error running script (call to f_<sha>): @user_script:<N>: <inner>",
#   <inner> being "user_script:<N>: x" for a Lua error, "@user_script: <N>: x" for an
#   error pushed by redis.call (a server reply such as "-READONLY ..." included), or the
#   server's own error text (its code is recovered from there: Redis 6 replies ERR).
# - Compile errors (all versions): "ERR Error compiling script (new function):
#   user_script:<N>: ..." ("Error compiling function:" for FUNCTION LOAD).

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
    r"^ERR Error running script \(call to [^)]*\): (?:@(?P<chunk>\w+):(?P<line>\d+): )?(?P<rest>.*)$", re.S
)
_COMPILE = re.compile(
    r"^ERR Error compiling (?:script \([^)]*\)|function): @?user_(?:script|function):(?P<line>\d+): "
    r"(?P<message>.*)$",
    re.S,
)
_LUA_POSITION = re.compile(r"^user_(?:script|function):(?P<line>\d+): (?P<message>.*)$", re.S)
_V6_PUSHED = re.compile(r"^@user_(?:script|function): (?P<line>\d+): -?(?P<message>.*)$", re.S)
_CODE = re.compile(r"^(?P<code>[A-Z][A-Z0-9_]*) (?P<message>.*)$", re.S)
ANY_POSITION = re.compile(r"@?user_(?:script|function):(?P<line>\d+)")
"""A script position anywhere in a message (the script layer relabels each one)."""
# Codes whose class is given only to the server's own wording (Redis and Valkey texts).
_SERVER_WORDING = {
    "NOSCRIPT": re.compile(r"NOSCRIPT No matching script\.(?: Please use EVAL\.)?$"),
    "BUSY": re.compile(r"BUSY \w+ is busy running "),
}


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
    if code not in COMMAND_ERROR_CODES:
        return Failure(LuaRaisedError, code, message, line)
    return Failure(CODES.get(code, ResponseError).in_script or LuaCommandError, code, message, line)


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
        if inner := _V6_PUSHED.match(rest):  # always a refusal: ERR unless its text has a code
            code, message = _split_code(inner["message"])
            if code not in COMMAND_ERROR_CODES:
                code, message = "ERR", inner["message"]
            return _classified(code, message, int(inner["line"]))
        return _classified(*_split_code(rest), outer)
    if match := _SUFFIX.search(text):
        code, message = _split_code(text[: match.start()])
        if inner := _LUA_POSITION.match(message):
            return Failure(LuaRaisedError, code, inner["message"], int(inner["line"]))
        return _classified(code, message, int(match["line"]))
    return None


def response_error(text: str | bytes) -> ResponseError:
    """Build the typed exception for one server error reply (returned, not raised)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    failure = parse(text)
    if failure is not None:
        return failure.error(text, code=failure.code, message=failure.message, rendered_line=failure.line)
    code = text.partition(" ")[0]
    wording = _SERVER_WORDING.get(code)
    if wording is not None and not wording.match(text):
        return ResponseError(text)
    return CODES.get(code, ResponseError)(text)
