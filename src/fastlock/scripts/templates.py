"""Render Lua script templates: partial includes, metadata declarations and a source map.

Directives are Lua comments on their own line, so a template stays valid Lua:

``-- #include "shared/_name.lua"``
    Paste a partial after the directive line. Includes are recursive; each partial is
    pasted at most once per render (a repeated include leaves only the comment); an
    include cycle or a missing partial is a :class:`~fastlock.TemplateError` naming the
    chain of includes.

``-- #meta now debug max_history script_name server_version``
    Ask for call metadata (any subset, in a template or any partial it includes). The
    client appends the declared values after the caller's arguments, always in the order
    of :data:`META_FIELDS`, and the renderer puts one generated line at the top of the
    script (after a ``#!lua`` shebang, if any) that moves them from ``ARGV`` into a local
    table, so ``ARGV`` holds the caller's arguments only::

        META.now             -- number: client clock, seconds since the epoch (float)
        META.debug           -- boolean: the client's debug setting
        META.max_history     -- number: the client's max_history setting
        META.script_name     -- string: the script's registry name
        META.server_version  -- string: the server's redis_version (Valkey reports its
                             -- Redis compatibility version there)

    A script that declares nothing gets nothing appended and no generated line.

``-- #const``
    The lines after it declare constants, each ``local NAME, NAME = 1, 2.5`` (upper-case
    names bound to number literals; the block ends at the first other line). In the lines
    rendered after a declaration the renderer writes each name, where it is read, as its
    number (:mod:`~fastlock.scripts.constants`: a local that a function reads costs the
    server an upvalue on every call). A constant's name is only read: one assigned
    (``NAME = ...``), declared again or taken as a parameter is a ``TemplateError``.

Every rendered line maps back to the file and line it came from (:meth:`Rendered.origin`);
the generated line maps to the first ``#meta`` directive.

Lines are Lua's (:func:`lua_lines`): a line ends at ``\n``, ``\r``, ``\r\n`` or ``\n\r``
and nowhere else (``\f``, ``\v``, ``\x85``, U+2028 ... are ordinary characters, in a
comment as anywhere), so line numbers count as the server counts them. Each line keeps its
own line ending: a script without directives renders to its source exactly, and a
rendered script to its files' bytes with the partials and the generated line put in (a
file's last line without an ending gets ``\n`` when something follows it).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import TemplateError
from .constants import ConstantError, declared, fold

__all__ = ["META_FIELDS", "Rendered", "Resolver", "SourceFile", "lua_lines", "render"]

META_FIELDS = ("now", "debug", "max_history", "script_name", "server_version")
_META_READERS = {
    "now": "tonumber({})",
    "debug": '{} == "1"',
    "max_history": "tonumber({})",
    "script_name": "{}",
    "server_version": "{}",
}
# ASCII: \s is C's isspace, Lua's white space (a line holds no \n or \r)
_INCLUDE = re.compile(r"^\s*--\s*#include\b(?P<rest>.*)$", re.ASCII | re.DOTALL)
_INCLUDE_NAME = re.compile(r'\s+"(?P<name>[^"]+)"\s*$', re.ASCII)
_META = re.compile(r"^\s*--\s*#meta\b(?P<fields>.*)$", re.ASCII | re.DOTALL)
_CONST = re.compile(r"^\s*--\s*#const\s*$", re.ASCII)
_WORD = re.compile(r"\S+", re.ASCII)
_LUA_BREAK = re.compile(r"\r\n|\n\r|\r|\n")


def lua_lines(text: str) -> list[tuple[str, str]]:
    """``text`` as Lua's lexer reads it: (line, line ending) pairs, the endings ``"\n"``,
    ``"\r"``, ``"\r\n"``, ``"\n\r"`` (paired greedily, as Lua does) or ``""`` for a last
    line without one; joined back they are ``text``. A ``#!`` shebang line ends at the first
    ``\n``, as the server reads it (a ``\r`` before that belongs to the shebang)."""
    lines: list[tuple[str, str]] = []
    start = 0
    if text.startswith("#!"):
        newline = text.find("\n")
        if newline < 0:
            return [(text, "")]
        end = _LUA_BREAK.match(text, newline)
        assert end is not None
        lines.append((text[:newline], end[0]))
        start = end.end()
    for end in _LUA_BREAK.finditer(text, start):
        lines.append((text[start : end.start()], end[0]))
        start = end.end()
    if start < len(text):
        lines.append((text[start:], ""))
    return lines


def _joined(ending: str, following: str) -> str:
    """The ending for a line followed by the line ``following`` (with its ending), so that
    the two neither run together nor merge into one Lua break: unchanged for two lines
    of one text, as :func:`lua_lines` split it."""
    ending = ending or "\n"
    first = following[:1]
    if len(ending) == 1 and first in ("\n", "\r") and first != ending:
        ending += first  # "\r" + "\n..." would read as one break
    return ending


@dataclass(frozen=True, eq=False)
class SourceFile:
    """One template or partial: ``name`` as includes and reports spell it
    (``"lock_acquire.lua"``, ``"shared/_debug.lua"``), ``path`` where it was read from
    (``None`` for a source given as a string), its Lua lines without line endings, and
    their ``endings`` (:func:`lua_lines`; missing ones read as ``"\n"``)."""

    name: str
    path: str | None
    lines: tuple[str, ...]
    endings: tuple[str, ...] = ()

    @classmethod
    def from_text(cls, name: str, path: str | None, text: str) -> SourceFile:
        lines = lua_lines(text)
        return cls(name, path, tuple(line for line, _ in lines), tuple(end for _, end in lines))

    def ending(self, index: int) -> str:
        """The line ending of line ``index + 1``."""
        return self.endings[index] if index < len(self.endings) else "\n"

    @property
    def where(self) -> str:
        """The path if the file has one, else its name."""
        return self.path or self.name


Resolver = Callable[[str, SourceFile], SourceFile]
"""``resolve(include_name, including_file)`` returns the partial or raises ``LookupError``."""


@dataclass(frozen=True, eq=False)
class Rendered:
    """A rendered script: ``source`` (its files' bytes with the partials and the generated
    line put in, each line ending as in its file), the declared ``meta`` fields in
    :data:`META_FIELDS` order, and ``origins[i]`` = (file, line) of Lua line ``i + 1`` of
    ``source``."""

    source: str
    meta: tuple[str, ...]
    origins: tuple[tuple[SourceFile, int], ...]

    def origin(self, line: int) -> tuple[SourceFile, int] | None:
        """(file, line) that rendered line ``line`` (1-based) came from, if it exists."""
        return self.origins[line - 1] if 0 < line <= len(self.origins) else None


def _chain(stack: list[tuple[SourceFile, int]], last: str) -> str:
    return " -> ".join(f"{file.name}:{line}" for file, line in stack) + f" -> {last}"


def render(main: SourceFile, resolve: Resolver) -> Rendered:
    """Expand ``main``'s includes and metadata declarations; see the module docstring."""
    lines: list[str] = []
    endings: list[str] = []
    origins: list[tuple[SourceFile, int]] = []
    meta: set[str] = set()
    meta_at: list[tuple[SourceFile, int]] = []
    pasted: set[str] = set()
    stack: list[tuple[SourceFile, int]] = []  # (file, line of the include being expanded)
    constants: list[tuple[int, dict[str, str]]] = []  # (index in lines, its constants)

    def paste(file: SourceFile) -> None:
        declaring = False
        for number, text in enumerate(file.lines, 1):
            lines.append(text)
            endings.append(file.ending(number - 1))
            origins.append((file, number))
            if declaring and (found := declared(text)) is not None:
                constants.append((len(lines) - 1, found))
                continue
            declaring = False
            if _CONST.match(text):
                if number == len(file.lines) or declared(file.lines[number]) is None:
                    raise TemplateError(
                        f"{file.name}:{number}: -- #const must be followed by lines like "
                        "local NAME, NAME = 1, 2"
                    )
                declaring = True
            elif match := _INCLUDE.match(text):
                name = _INCLUDE_NAME.match(match["rest"])
                if name is None:
                    raise TemplateError(
                        f'{file.name}:{number}: write includes as -- #include "shared/_name.lua"'
                    )
                stack.append((file, number))
                include(name["name"])
                stack.pop()
            elif match := _META.match(text):
                fields = set(_WORD.findall(match["fields"]))
                unknown = fields.difference(META_FIELDS)
                if unknown:
                    raise TemplateError(
                        f"{file.name}:{number}: unknown #meta field(s) {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(META_FIELDS)}"
                    )
                meta.update(fields)
                meta_at.append((file, number))

    def include(name: str) -> None:
        try:
            partial = resolve(name, stack[-1][0])
        except LookupError as exc:
            raise TemplateError(f"{exc.args[0]} (include chain: {_chain(stack, name)})") from None
        key = partial.where
        if any(file.where == key for file, _ in stack):
            raise TemplateError(f"include cycle: {_chain(stack, partial.name)}")
        if key not in pasted:
            pasted.add(key)
            paste(partial)

    pasted.add(main.where)
    paste(main)
    fields = tuple(field for field in META_FIELDS if field in meta)
    if fields:
        at = 1 if lines and lines[0].startswith("#!") else 0
        lines.insert(at, _meta_prelude(fields))
        endings.insert(at, "\n")
        origins.insert(at, meta_at[0])
        constants = [(index + (index >= at), found) for index, found in constants]
    # Where lines of different places meet: no-ops between two lines of one file.
    for i in range(len(lines) - 1):
        endings[i] = _joined(endings[i], lines[i + 1] + endings[i + 1])
    source = "".join(text + ending for text, ending in zip(lines, endings, strict=True))
    if constants:
        sizes = (len(text) + len(ending) for text, ending in zip(lines, endings, strict=True))
        starts = [0, *itertools.accumulate(sizes)]
        try:  # each declaration holds from the end of its line
            source = fold(source, [(starts[index + 1], found) for index, found in constants])
        except ConstantError as exc:
            file, number = origins[bisect.bisect_right(starts, exc.offset) - 1]
            raise TemplateError(f"{file.name}:{number}: {exc}") from None
    return Rendered(source, fields, tuple(origins))


def _meta_prelude(fields: tuple[str, ...]) -> str:
    """One Lua line moving the appended metadata from the end of ARGV into ``META``."""
    reads = " ".join(
        f"META.{field} = {_META_READERS[field].format(f'ARGV[n + {i}]')}" for i, field in enumerate(fields, 1)
    )
    return (
        f"local META = {{}} do local n = #ARGV - {len(fields)} {reads} "
        "for i = #ARGV, n + 1, -1 do ARGV[i] = nil end end"
    )
