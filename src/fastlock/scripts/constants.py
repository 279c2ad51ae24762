"""Declared constants written in place of their names: the ``-- #const`` directive of
:mod:`~fastlock.scripts.templates`.

``EVALSHA`` runs a script's whole body on every call, so every local that one of its
functions reads is an upvalue the server makes anew on each call (about 0.5k instructions
each on Redis 7.0). A name the renderer writes as its number costs nothing at run time (Lua
folds ``2 * 8`` when it compiles). The declaration line itself stays as it is, so a name
read where the fold does not reach still has its value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ConstantError", "declared", "fold"]

_NUMBER = r"-?\d+(?:\.\d+)?"
_NAMES = r"[A-Z][A-Z0-9_]*(?:\s*,\s*[A-Z][A-Z0-9_]*)*"
_DECLARATION = re.compile(
    rf"^local\s+(?P<names>{_NAMES})\s*=\s*(?P<values>{_NUMBER}(?:\s*,\s*{_NUMBER})*)\s*(?:--.*)?$", re.ASCII
)
_SPLIT = re.compile(r"\s*,\s*")
# Lua 5.1's tokens, as far as folding needs them: comments and strings (long forms too) are
# skipped whole, a numeral is not a name, and "==" is not "=".
_TOKEN = re.compile(
    r"""
      (?P<comment>--\[(?P<ceq>=*)\[.*?\](?P=ceq)\]|--[^\r\n]*)
    | (?P<string>\[(?P<seq>=*)\[.*?\](?P=seq)\]|"(?:\\.|[^"\\\r\n])*"|'(?:\\.|[^'\\\r\n])*')
    | (?P<number>\.?\d(?:[eE][+-]|[\w.])*)
    | (?P<name>[A-Za-z_]\w*)
    | (?P<op>==|~=|<=|>=|\.\.\.?|\S)
    """,
    re.ASCII | re.DOTALL | re.VERBOSE,
)
_DECLARING = ("local", "for", "function")


class ConstantError(ValueError):
    """A constant's name used otherwise than read: ``offset`` is where, in the source."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def declared(line: str) -> dict[str, str] | None:
    """The constants ``line`` declares (``local A, B = 1, 2``, upper-case names bound to
    number literals, one each), by name; ``None`` when it is no such declaration."""
    match = _DECLARATION.match(line)
    if match is None:
        return None
    names, values = _SPLIT.split(match["names"]), _SPLIT.split(match["values"])
    if len(names) != len(values):
        return None
    return dict(zip(names, values, strict=True))


def fold(source: str, constants: Sequence[tuple[int, dict[str, str]]]) -> str:
    """``source`` with each name of ``constants`` (``(offset, {name: literal})`` in source
    order, each holding from its offset on) written as its literal where it is read; a
    field (``t.NAME``) is not a read. Raises :class:`ConstantError` where such a name is
    declared again, a parameter, a table key or assigned (``NAME = ...``; a multiple
    assignment that starts with it, ``NAME, x = ...``, is not caught)."""
    tokens = [m for m in _TOKEN.finditer(source) if m.lastgroup != "comment"]
    pending = list(reversed(constants))
    active: dict[str, str] = {}
    out: list[str] = []
    done = 0
    for i, token in enumerate(tokens):
        while pending and pending[-1][0] <= token.start():
            active.update(pending.pop()[1])
        name = token[0]
        literal = active.get(name) if token.lastgroup == "name" else None
        if literal is None or (i and tokens[i - 1][0] in (".", ":")):
            continue
        if i + 1 < len(tokens) and tokens[i + 1][0] == "=":
            raise ConstantError(f"constant {name} is assigned (a constant is only read)", token.start())
        if _declares(tokens, i):
            raise ConstantError(f"constant {name} is declared again (a constant is only read)", token.start())
        if literal.startswith("-"):
            literal = f"({literal})"  # "x-NAME" is no comment
        elif source.startswith(".", token.end()):
            literal += " "  # "NAME..x" is no malformed number
        out += [source[done : token.start()], literal]
        done = token.end()
    return "".join(out) + source[done:] if out else source


def _declares(tokens: list[re.Match[str]], at: int) -> bool:
    """Whether the name ``tokens[at]`` is declared there: one of the names after ``local``,
    ``for`` or ``function``, or a parameter (``function (a, b)``, ``function t.f:g(a)``)."""
    i = at
    while i >= 2 and tokens[i - 1][0] == "," and tokens[i - 2].lastgroup == "name":
        i -= 2
    before = tokens[i - 1][0] if i else ""
    if before in _DECLARING:
        return True
    if before != "(":
        return False
    i -= 2  # the token before "(": "function", or the last name of "function t.f:g"
    while i >= 0 and tokens[i].lastgroup == "name" and tokens[i][0] != "function":
        if i and tokens[i - 1][0] == "function":
            return True
        if i < 2 or tokens[i - 1][0] not in (".", ":"):
            return False
        i -= 2
    return i >= 0 and tokens[i][0] == "function"
