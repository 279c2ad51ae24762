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

Every rendered line maps back to the file and line it came from (:meth:`Rendered.origin`);
the generated line maps to the first ``#meta`` directive.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import TemplateError

__all__ = ["META_FIELDS", "Rendered", "Resolver", "SourceFile", "render"]

META_FIELDS = ("now", "debug", "max_history", "script_name", "server_version")
_META_READERS = {
    "now": "tonumber({})",
    "debug": '{} == "1"',
    "max_history": "tonumber({})",
    "script_name": "{}",
    "server_version": "{}",
}
_INCLUDE = re.compile(r"^\s*--\s*#include\b(?P<rest>.*)$")
_INCLUDE_NAME = re.compile(r'\s+"(?P<name>[^"]+)"\s*$')
_META = re.compile(r"^\s*--\s*#meta\b(?P<fields>.*)$")


@dataclass(frozen=True, eq=False)
class SourceFile:
    """One template or partial: ``name`` as includes and reports spell it
    (``"lock_acquire.lua"``, ``"shared/_debug.lua"``), ``path`` where it was read from
    (``None`` for a source given as a string), and its lines without line endings."""

    name: str
    path: str | None
    lines: tuple[str, ...]

    @classmethod
    def from_text(cls, name: str, path: str | None, text: str) -> SourceFile:
        return cls(name, path, tuple(text.splitlines()))

    @property
    def where(self) -> str:
        """The path if the file has one, else its name."""
        return self.path or self.name


Resolver = Callable[[str, SourceFile], SourceFile]
"""``resolve(include_name, including_file)`` returns the partial or raises ``LookupError``."""


@dataclass(frozen=True, eq=False)
class Rendered:
    """A rendered script: ``source`` (ends with a newline), the declared ``meta`` fields
    in :data:`META_FIELDS` order, and ``origins[i]`` = (file, line) of rendered line ``i + 1``."""

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
    origins: list[tuple[SourceFile, int]] = []
    meta: set[str] = set()
    meta_at: list[tuple[SourceFile, int]] = []
    pasted: set[str] = set()
    stack: list[tuple[SourceFile, int]] = []  # (file, line of the include being expanded)

    def paste(file: SourceFile) -> None:
        for number, text in enumerate(file.lines, 1):
            lines.append(text)
            origins.append((file, number))
            if match := _INCLUDE.match(text):
                name = _INCLUDE_NAME.match(match["rest"])
                if name is None:
                    raise TemplateError(
                        f'{file.name}:{number}: write includes as -- #include "shared/_name.lua"'
                    )
                stack.append((file, number))
                include(name["name"])
                stack.pop()
            elif match := _META.match(text):
                fields = set(match["fields"].split())
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
        origins.insert(at, meta_at[0])
    return Rendered("\n".join(lines) + "\n", fields, tuple(origins))


def _meta_prelude(fields: tuple[str, ...]) -> str:
    """One Lua line moving the appended metadata from the end of ARGV into ``META``."""
    reads = " ".join(
        f"META.{field} = {_META_READERS[field].format(f'ARGV[n + {i}]')}" for i, field in enumerate(fields, 1)
    )
    return (
        f"local META = {{}} do local n = #ARGV - {len(fields)} {reads} "
        "for i = #ARGV, n + 1, -1 do ARGV[i] = nil end end"
    )
