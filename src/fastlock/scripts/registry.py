"""Script objects, their call counters, and the thread-safe registry that renders them.

Scripts live in folders as ``<name>.lua`` (flat names such as ``lock_acquire``), partials
in ``shared/_<name>.lua`` (see :mod:`fastlock.scripts.templates` for the directives). The
built-in folder ships in the wheel as package data ``fastlock/lua``; in a source tree
it is the repository's top-level ``lua/``. A registry searches the caller's folders first,
then the built-in one; a partial is looked up in the including file's folder first.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from .. import metrics
from ..exceptions import ArgumentError, ScriptNotFoundError
from .templates import Rendered, SourceFile, render

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "Script",
    "ScriptCounters",
    "ScriptRegistry",
    "ScriptStats",
    "builtin_folder",
    "flush_stats",
    "guard",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_]*$")


def builtin_folder() -> Traversable:
    """The built-in script folder: package data ``fastlock/lua``, else the source tree's ``lua/``."""
    packaged = resources.files("fastlock") / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "lua"


@dataclass(frozen=True)
class ScriptCounters:
    """A snapshot of one script's counters; ``total_time`` is in seconds (client side,
    round trips and retries included)."""

    calls: int
    errors: int
    reloads: int
    total_time: float

    @property
    def mean_time(self) -> float:
        """Mean seconds per call (0.0 before the first call)."""
        return self.total_time / self.calls if self.calls else 0.0


class ScriptStats:
    """Thread-safe counters of script ``name``, cheap to update on every call.

    A call appends its duration to ``durations`` (atomic, no lock) and calls :meth:`fold`
    once the list holds ``FOLD_AT`` entries, which moves them into the totals under the
    lock, so memory stays bounded; the folded successes go to the installed
    :class:`~fastlock.metrics.Observer` as one batch (:func:`flush_stats` folds every
    script's now).
    """

    FOLD_AT = 256
    __slots__ = ("__weakref__", "_calls", "_errors", "_lock", "_reloads", "_total", "durations", "name")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.durations: list[float] = []
        self._lock = threading.Lock()
        self._calls = 0
        self._total = 0.0
        self._errors = 0
        self._reloads = 0
        _LIVE.add(self)

    def record_error(self, seconds: float) -> None:
        """Count one call that failed after ``seconds``."""
        with self._lock:
            self._errors += 1
            self._calls += 1
            self._total += seconds

    def record_reload(self) -> None:
        """Count one ``SCRIPT LOAD`` after NOSCRIPT."""
        with self._lock:
            self._reloads += 1

    def fold(self) -> None:
        """Move the pending durations into the totals."""
        with self._lock:
            self._fold()

    def _fold(self) -> None:
        # Only this method removes items, always under the lock, and appends go to the end:
        # the first n items stay put between the copy and the delete.
        durations = self.durations
        n = len(durations)
        done = durations[:n]
        del durations[:n]
        self._calls += n
        self._total += sum(done)
        observer = metrics.observer
        if observer is not None and n:
            observer.script_calls(self.name, done)

    def snapshot(self) -> ScriptCounters:
        """The counters now."""
        with self._lock:
            self._fold()
            return ScriptCounters(self._calls, self._errors, self._reloads, self._total)


_LIVE: weakref.WeakSet[ScriptStats] = weakref.WeakSet()


def flush_stats() -> None:
    """Fold the pending durations of every live script (an exporter, before it reads)."""
    for stats in list(_LIVE):
        stats.fold()


_RESERVED_CODES = (
    "NOSCRIPT",
    "BUSY",
    "READONLY",
    "LOADING",
    "OOM",
    "MOVED",
    "ASK",
    "TRYAGAIN",
    "CLUSTERDOWN",
)
"""Codes the server gives a call it refused: NOSCRIPT and BUSY make fastlock send the call
again, the cluster ones would route it elsewhere."""
_GUARD_OPEN = "local fastlock_script = function() "
_GUARD_CLOSE = (
    "end local reply = fastlock_script() "
    'local err = type(reply) == "table" and reply.err '
    'if type(err) == "string" and ({'
    + ", ".join(f"{code} = true" for code in _RESERVED_CODES)
    + '})[err:match("^%-?(%u+)")] then error(redis.REDIS_VERSION and reply or err) end '
    "return reply"
)


def guard(source: str) -> str:
    """``source`` as sent to the server: run as a function whose reply, if it is an error
    in one of the codes the server gives a refused call (:data:`_RESERVED_CODES`), is
    raised instead of returned. A raised error carries the script suffix, so a script that
    returns ``redis.error_reply("NOSCRIPT No matching script.")`` after writing is never
    taken for the server refusing it, and never run again.

    ``source`` is kept byte for byte, so every line keeps its number: the opening goes in
    front of the first line, or after a ``#!`` shebang line (which ends at the first
    ``\n``, as the server reads it); the closing is one added last line (after a ``\n``
    unless ``source`` ends with a line break). A ``#!`` source without any ``\n`` is no
    shebang the server accepts: it is sent as it is, for the server to refuse."""
    at = 0
    if source.startswith("#!"):
        newline = source.find("\n")
        if newline < 0:
            return source
        at = newline + (2 if source.startswith("\r", newline + 1) else 1)  # "\n\r" is one break
    body = source[:at] + _GUARD_OPEN + source[at:]
    return body + ("" if body.endswith(("\n", "\r")) else "\n") + _GUARD_CLOSE + "\n"


class Script:
    """A rendered script: ``name``, ``path`` of its template (``None`` when registered from
    a string), rendered ``source``, ``body`` (the UTF-8 bytes sent: the source behind
    :func:`guard`), ``sha`` (hex SHA1 of the body, what ``SCRIPT LOAD`` returns), declared
    ``meta`` fields, and ``stats``."""

    __slots__ = ("body", "meta", "name", "path", "rendered", "sha", "source", "stats")

    def __init__(self, name: str, rendered: Rendered, path: str | None = None) -> None:
        self.name = name
        self.path = path
        self.rendered = rendered
        self.source = rendered.source
        self.body = guard(rendered.source).encode()
        self.sha = hashlib.sha1(self.body).hexdigest()
        self.meta = rendered.meta
        self.stats = ScriptStats(name)

    def origin(self, line: int) -> tuple[SourceFile, int] | None:
        """(file, line) in the templates that rendered line ``line`` came from."""
        return self.rendered.origin(line)

    def __repr__(self) -> str:
        return f"<fastlock.Script {self.name} sha={self.sha[:12]} path={self.path}>"


def _read(entry: Traversable) -> str:
    """A script file's text, its line endings untouched (``read_text`` would translate them)."""
    return entry.read_bytes().decode("utf-8")


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise ArgumentError(f"invalid script name {name!r}: use letters, digits and _, not starting with _")


class ScriptRegistry:
    """Named scripts from folders and strings, each rendered once (thread-safe).

    ``paths`` are searched in order before the built-in folder (``builtin=False`` leaves
    it out). A name renders on first use and then stays as it is, even if a folder added
    later holds a file of that name.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = (), *, builtin: bool = True) -> None:
        self._folders: list[Traversable] = []
        self._builtin = builtin_folder() if builtin else None
        self._scripts: dict[str, Script] = {}
        self._sources: dict[str, str] = {}
        self._lock = threading.Lock()
        self.loaded = MappingProxyType(self._scripts)
        """Scripts rendered so far, by name (read-only view)."""
        for path in paths:
            self.add_path(path)

    @property
    def folders(self) -> tuple[Traversable, ...]:
        """The folders searched, in order."""
        return (*self._folders, *([self._builtin] if self._builtin is not None else []))

    def add_path(self, path: str | os.PathLike[str]) -> None:
        """Search ``path`` after the folders given so far, before the built-in one."""
        folder = Path(path)
        if not folder.is_dir():
            raise ArgumentError(f"script folder {folder} is not a directory")
        with self._lock:
            self._folders.append(folder)

    def get(self, name: str) -> Script:
        """The script ``name``, rendered on first use; :class:`~fastlock.ScriptNotFoundError`
        if no folder holds ``<name>.lua`` and no source was registered under that name."""
        script = self._scripts.get(name)
        if script is None:
            with self._lock:
                script = self._scripts.get(name) or self._load(name)
        return script

    def add(self, name: str, source: str) -> Script:
        """Register ``source`` as script ``name`` (includes resolve against the folders).

        Registering the same source twice returns the same script; another source under a
        name already in use is a ``ValueError``.
        """
        _check_name(name)
        with self._lock:
            known = self._sources.get(name)
            if (known is None and name in self._scripts) or known not in (None, source):
                raise ArgumentError(f"script name {name!r} is already in use by another source")
            self._sources[name] = source
            return self._scripts.get(name) or self._load(name)

    def names(self) -> list[str]:
        """Every script name available (partials excluded), sorted."""
        found = set(self._sources)
        for folder in self.folders:
            for entry in folder.iterdir():
                stem = entry.name[:-4]
                if entry.name.endswith(".lua") and _NAME.match(stem) and entry.is_file():
                    found.add(stem)
        return sorted(found)

    def load_all(self) -> list[Script]:
        """Render every available script (e.g. to load them all into a server)."""
        return [self.get(name) for name in self.names()]

    def _load(self, name: str) -> Script:
        # Called with the lock held.
        if name in self._sources:
            main, home = SourceFile.from_text(f"<{name}>", None, self._sources[name]), None
        else:
            _check_name(name)
            main, home = self._find(name)
        homes = {main.where: home}

        def resolve(include: str, including: SourceFile) -> SourceFile:
            parts = include.split("/")
            if include.startswith("/") or ".." in parts:
                raise LookupError(f"include {include!r} must be a relative path inside a script folder")
            first = homes[including.where]
            for folder in ([first] if first is not None else []) + [
                f for f in self.folders if f is not first
            ]:
                entry = folder.joinpath(*parts)
                if entry.is_file():
                    partial = SourceFile.from_text(include, str(entry), _read(entry))
                    homes.setdefault(partial.where, folder)
                    return partial
            raise LookupError(f"partial {include!r} not found in {', '.join(map(str, self.folders))}")

        script = Script(name, render(main, resolve), main.path)
        self._scripts[name] = script
        return script

    def _find(self, name: str) -> tuple[SourceFile, Traversable]:
        for folder in self.folders:
            entry = folder.joinpath(f"{name}.lua")
            if entry.is_file():
                return SourceFile.from_text(entry.name, str(entry), _read(entry)), folder
        raise ScriptNotFoundError(
            f"no script {name!r}: no {name}.lua in {', '.join(map(str, self.folders)) or '(no folders)'}"
        )
