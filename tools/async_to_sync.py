#!/usr/bin/env python3
"""Write the sync shells of fastlock from their asyncio sources (psycopg 3's model).

Each pair in :data:`PAIRS` is an async module, the source, and the sync module written from it;
the sync one starts with a header saying so and is never edited by hand. The rewrite works on
tokens (comments and layout kept), in this order:

1. ``if True:  # ASYNC`` blocks: the ``if`` part is the async side's, dropped; the ``else``
   part (optional) is the sync side's, kept one level less indented. No nesting, no ``elif``.
   An import there that only the renamed names use says ``# noqa: F401`` (removed here).
2. ``async`` before ``def``/``with``/``for`` and every ``await`` removed, ``Awaitable[T]``
   written ``T``; ``__aenter__`` and
   the other names of :data:`NAMES` (dotted ones too: ``asyncio.sleep``, ``aio.client``)
   replaced; in strings, the phrases of :data:`PHRASES` then the class names of :data:`NAMES`
   (not the module names: a docstring may name the source file).
3. The header; unused imports dropped and imports sorted (``ruff check --fix --select
   F401,I``), then ``ruff format`` (the repo's settings).

The same tool writes ``_core_api.py`` from the Cython core's stub ``_core.pyi``, the one hand-kept
declaration of the cores' interface: :func:`protocols` turns the stub module into a ``Core``
Protocol and each of its classes into a ``Core<Name>`` Protocol (``_impl`` re-exports them, and
mypy checks callers and both cores against them).

``python tools/async_to_sync.py`` rewrites every generated file, ``--check`` only says which differ
(exit 1); ``tests/test_generated.py`` runs the check in the suite.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = "tools/async_to_sync.py"

PAIRS: dict[str, str] = {
    "src/fastlock/cluster/aio.py": "src/fastlock/cluster/client.py",
    "src/fastlock/cluster/nodes_aio.py": "src/fastlock/cluster/nodes.py",
    "src/fastlock/cluster/sentinel_aio.py": "src/fastlock/cluster/sentinel.py",
    "src/fastlock/cluster/listeners_aio.py": "src/fastlock/cluster/listeners.py",
    "src/fastlock/aio/queue.py": "src/fastlock/queues/queue.py",
    "src/fastlock/aio/access.py": "src/fastlock/sync/access.py",
    "src/fastlock/aio/lock.py": "src/fastlock/locks/lock.py",
    "src/fastlock/aio/renewing.py": "src/fastlock/locks/renewing.py",
    "src/fastlock/aio/manager.py": "src/fastlock/locks/manager.py",
    "src/fastlock/aio/reaper.py": "src/fastlock/locks/reaper.py",
    "src/fastlock/aio/script_calls.py": "src/fastlock/sync/script_calls.py",
    "src/fastlock/aio/drive.py": "src/fastlock/sync/drive.py",
    "src/fastlock/aio/limiter.py": "src/fastlock/limits/limiter.py",
    "src/fastlock/aio/rwlock.py": "src/fastlock/locks/rwlock.py",
    "src/fastlock/compat/redis_py_aio.py": "src/fastlock/compat/redis_py_sync.py",
    "src/fastlock/_core.pyi": "src/fastlock/_core_api.py",
}
"""The source -> the module written from it (paths from the repo root): an async source's sync
shell, and the core's stub's Protocols (:func:`protocols`)."""

NAMES: dict[str, str] = {
    # classes and functions with an async name
    "AsyncClusterClient": "ClusterClient",
    "AsyncClusterNodes": "ClusterNodes",
    "AsyncLimiter": "Limiter",
    "AsyncListenerSlot": "ListenerSlot",
    "AsyncLock": "Lock",
    "AsyncLockManager": "LockManager",
    "AsyncLockQueueAccess": "LockQueueAccess",
    "AsyncQueue": "Queue",
    "AsyncRenewingLock": "RenewingLock",
    "AsyncRWLock": "RWLock",
    "AsyncRWSide": "RWSide",
    "AsyncReaper": "Reaper",
    "AsyncRoutedListener": "RoutedListener",
    "AsyncRunner": "Runner",
    "AsyncSignal": "ThreadSignal",
    "AsyncScriptCalls": "ScriptCalls",
    "AsyncSentinelClient": "SentinelClient",
    "durable_call_async": "durable_call",
    "run_plan_async": "run_plan",
    # the protocols
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    # asyncio primitives -> threading and time
    "asyncio.sleep": "time.sleep",
    "asyncio.Event": "threading.Event",
    "asyncio.Lock": "threading.Lock",
    "asyncio.Condition": "threading.Condition",
    # the transport modules
    "aio.client": "sync.client",
    "aio.drive": "sync.drive",
    "aio.notify": "sync.notify",
    "aio.pipeline": "sync.pipeline",
    "aio.script_calls": "sync.script_calls",
    "nodes_aio": "nodes",
    "sentinel_aio": "sentinel",
    "listeners_aio": "listeners",
}
"""Names of the async side -> the sync side's (a dotted key matches dotted names only)."""

PHRASES: list[tuple[str, str]] = [
    ("<fastlock.cluster.AsyncClusterClient ", "<fastlock.ClusterClient "),
    ("<fastlock.cluster.AsyncSentinelClient ", "<fastlock.SentinelClient "),
    ("<fastlock.aio.AsyncLockManager ", "<fastlock.LockManager "),
    ("Build it with ``await AsyncSentinelClient.connect(...)``.", "Built connected, its watcher started."),
    (":class:`fastlock.aio.Client`", ":class:`fastlock.Client`"),
    (":class:`~fastlock.aio.AsyncQueue`", ":class:`~fastlock.queues.queue.Queue`"),
    (":class:`~fastlock.aio.AsyncLimiter`", ":class:`~fastlock.limits.limiter.Limiter`"),
    (":class:`~fastlock.aio.AsyncRWLock`", ":class:`~fastlock.RWLock`"),
    (":class:`~fastlock.aio.AsyncLockManager`", ":class:`~fastlock.LockManager`"),
    (":meth:`fastlock.aio.Client.", ":meth:`fastlock.Client."),
    (":func:`~fastlock.operations.run_plan_async`", ":func:`~fastlock.operations.run_plan`"),
    (
        "Close it with ``await client.close()`` or ``async with``.",
        "Close it with ``client.close()`` or ``with``.",
    ),
    ("``await ", "``"),
]
"""Text in strings (docstrings, f-strings) -> the sync side's, replaced in this order."""

_ASYNC_IF = re.compile(r"^\s*if\b.*#\s*ASYNC\b")
_INDENT = "    "
_NOQA_F401 = re.compile(r"  # noqa: F401\b.*$", re.M)
_WORD = re.compile(  # the class names of NAMES, in strings
    r"\b("
    + "|".join(sorted((k for k in NAMES if k[0].isupper() and "." not in k), key=len, reverse=True))
    + r")\b"
)


class GenerateError(Exception):
    """A source the rewrite cannot express (an ``ASYNC`` block it does not handle)."""


def _drop_async_blocks(source: str, origin: str) -> str:
    """Step 1: each ``if True:  # ASYNC`` block replaced by its ``else`` body, dedented."""
    lines = source.splitlines(keepends=True)
    blocks: list[tuple[int, int, list[str]]] = []  # (first line, last line, 0-based; kept lines)
    for node in ast.walk(ast.parse(source, origin)):
        if not (isinstance(node, ast.If) and _ASYNC_IF.match(lines[node.lineno - 1])):
            continue
        if not (isinstance(node.test, ast.Constant) and node.test.value is True):
            raise GenerateError(f"{origin}:{node.lineno}: an ASYNC block is `if True:  # ASYNC`")
        kept: list[str] = []
        last = _end(node.body[-1]) - 1
        if node.orelse:
            if lines[node.orelse[0].lineno - 1].lstrip().startswith("elif"):
                raise GenerateError(f"{origin}:{node.lineno}: no elif after an ASYNC block")
            end = _end(node.orelse[-1]) - 1
            else_line = next(i for i in range(last + 1, end + 1) if lines[i].strip().startswith("else:"))
            kept = [
                _dedent(line, origin, i)
                for i, line in enumerate(lines[else_line + 1 : end + 1], else_line + 1)
            ]
            last = end
        blocks.append((node.lineno - 1, last, kept))
    blocks.sort()
    for (_, end, _), (start, _, _) in itertools.pairwise(blocks):
        if start <= end:
            raise GenerateError(f"{origin}:{start + 1}: ASYNC blocks do not nest")
    for start, end, kept in reversed(blocks):
        lines[start : end + 1] = kept
    return "".join(lines)


def _end(node: ast.stmt) -> int:
    assert node.end_lineno is not None
    return node.end_lineno


def _dedent(line: str, origin: str, index: int) -> str:
    line = _NOQA_F401.sub("", line)
    if line.startswith(_INDENT):
        return line[len(_INDENT) :]
    if line.strip():
        raise GenerateError(f"{origin}:{index + 1}: the else part of an ASYNC block must be indented")
    return line


def _strings(text: str) -> str:
    for old, new in PHRASES:
        text = text.replace(old, new)
    return _WORD.sub(lambda match: NAMES[match.group(1)], text)


def _rewrite_tokens(source: str) -> str:
    """Step 2: ``async``/``await`` removed, names and strings mapped (edits by position)."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1]

    def end(token: tokenize.TokenInfo) -> int:  # not token.end: Python 3.12.1 counts it in bytes
        return offset(token.start) + len(token.string)

    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.NL]
    edits: list[tuple[int, int, str]] = []  # (start, end, text) in source offsets
    fstring_start = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: f-strings in pieces
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if token.type == fstring_start:  # the whole f-string as one string, as on Python 3.11
            depth, j = 1, i + 1
            while depth:
                depth += {fstring_start: 1, fstring_end: -1}.get(tokens[j].type, 0)
                j += 1
            start, stop = offset(token.start), end(tokens[j - 1])
            _no_async_in(source[start:stop], token)
            edits.append((start, stop, _strings(source[start:stop])))
            i = j
            continue
        if token.type == tokenize.STRING:
            _no_async_in(token.string, token)
            edits.append((offset(token.start), end(token), _strings(token.string)))
        elif token.type == tokenize.NAME and token.string in ("async", "await"):
            assert following is not None
            if token.string == "async" and following.string not in ("def", "with", "for"):
                raise GenerateError(f"line {token.start[0]}: `async` before {following.string!r}")
            edits.append((offset(token.start), offset(following.start), ""))
        elif token.string == "Awaitable" and following is not None and following.string == "[":
            close = _closing(tokens, i + 1)  # Awaitable[T] -> T
            edits += [
                (offset(token.start), end(following), ""),
                (offset(close.start), end(close), ""),
            ]
        elif token.type == tokenize.NAME:
            j, dotted = _dotted(tokens, i)
            if dotted is not None:
                edits.append((offset(token.start), end(tokens[j - 1]), dotted))
                i = j
                continue
            if token.string in NAMES:
                edits.append((offset(token.start), end(token), NAMES[token.string]))
        i += 1
    for start, stop, text in reversed(edits):
        source = source[:start] + text + source[stop:]
    return source


def _no_async_in(text: str, token: tokenize.TokenInfo) -> None:
    if re.match(r"[a-zA-Z]*[fF]", text) and re.search(r"\{[^}]*\b(await|async)\b", text):
        raise GenerateError(
            f"line {token.start[0]}: no async/await inside an f-string (name the value first)"
        )


def _closing(tokens: list[tokenize.TokenInfo], i: int) -> tokenize.TokenInfo:
    """The ``]`` closing the ``[`` at token ``i``."""
    depth = 0
    for token in tokens[i:]:
        depth += {"[": 1, "]": -1}.get(token.string, 0) if token.type == tokenize.OP else 0
        if depth == 0:
            return token
    raise GenerateError(f"line {tokens[i].start[0]}: no closing bracket")


def _dotted(tokens: list[tokenize.TokenInfo], i: int) -> tuple[int, str | None]:
    """The longest dotted name of :data:`NAMES` starting at token ``i``: (the token after it,
    its replacement), or ``(i, None)``."""
    parts, j = [tokens[i].string], i + 1
    found: tuple[int, str | None] = (i, None)
    while j + 1 < len(tokens) and tokens[j].string == "." and tokens[j + 1].type == tokenize.NAME:
        parts.append(tokens[j + 1].string)
        j += 2
        name = ".".join(parts)
        if name in NAMES:
            found = (j, NAMES[name])
    return found


def _ruff(args: list[str], source: str, target: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", target, "-"],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if run.returncode not in (0, 1) or not run.stdout:
        raise GenerateError(f"ruff {' '.join(args)} failed on {target}: {run.stderr}")
    return run.stdout


PROTOCOLS_DOC = '''"""The cores' interface as Protocols, written from the Cython core's stub ``_core.pyi``
(the one hand-kept declaration): :class:`Core` is a core module (``fastlock._core`` or its
twin ``fastlock._core_py``), ``Core<Name>`` its class ``<Name>``. ``fastlock._impl``
re-exports them and has mypy check both cores against them."""'''


def _member(node: ast.stmt, method: bool = False) -> list[str]:
    """A stub statement as a member of a Protocol (``method``: a module function, which gets
    ``self``); ``@final`` dropped. One line each: ``ruff format`` wraps them."""
    if isinstance(node, ast.FunctionDef):
        if method:
            node.args.args.insert(0, ast.arg("self"))
        node.decorator_list = [d for d in node.decorator_list if ast.unparse(d) != "final"]
        node.body = [ast.Expr(ast.Constant(...))]
    return ast.unparse(node).replace(":\n    ...", ": ...").splitlines()


def protocols(stub: str) -> str:
    """The Protocols of the stub ``stub``: ``Core`` (the module: its variables as read-only
    properties, its functions as methods, its classes as properties typed ``type[Core<Name>]``)
    and ``Core<Name>`` for each class (its members, names of the stub's classes renamed)."""
    tree = ast.parse(stub)
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]

    class Rename(ast.NodeTransformer):
        """A stub class named in a parameter becomes ``Any`` (a core takes its own objects: a
        Protocol cannot say "the same core's"), elsewhere its Protocol ``Core<Name>``."""

        def visit_arg(self, node: ast.arg) -> ast.arg:
            if node.annotation is not None:
                node.annotation = ParameterRename().visit(node.annotation)
            return node

        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(f"Core{node.id}", node.ctx) if node.id in classes else node

    class ParameterRename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name("Any", node.ctx) if node.id in classes else node

    tree = ast.fix_missing_locations(Rename().visit(tree))
    head, core, bodies = ["from __future__ import annotations", ""], [], []
    for node in tree.body:
        if isinstance(node, ast.Import):
            head.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and node.module == "typing":
            names = sorted({alias.name for alias in node.names} - {"final"} | {"Protocol"})
            head.append(f"from typing import {', '.join(names)}")
        elif isinstance(node, ast.ImportFrom):
            head.append(ast.unparse(node))
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            continue
        elif isinstance(node, ast.Assign):  # a TypeVar
            bodies.append(["", ast.unparse(node)])
        elif isinstance(node, ast.AnnAssign):
            name, annotation = ast.unparse(node.target), ast.unparse(node.annotation)
            core += ["@property", f"def {name}(self) -> {annotation}: ..."]
        elif isinstance(node, ast.FunctionDef):
            core += _member(node, method=True)
        elif isinstance(node, ast.ClassDef):
            core += ["@property", f"def {node.name}(self) -> type[Core{node.name}]: ..."]
            members = [f'    """``{node.name}``."""', ""]
            members += [f"    {line}" for member in node.body for line in _member(member)]
            bodies.append(["", "", f"class Core{node.name}(Protocol):", *members])
    names = ["Core", *(f"Core{name}" for name in sorted(classes))]
    text = [PROTOCOLS_DOC, "", *head, "", f"__all__ = {names!r}".replace("'", '"'), ""]
    for body in bodies:
        text += body
    text += ["", "", "class Core(Protocol):", '    """A core module."""', ""]
    text += [f"    {line}" for line in core]
    return "\n".join(text) + "\n"


def generate(origin: str, target: str, source: str | None = None) -> str:
    """The text of ``target`` written from ``origin`` (paths from the repo root)."""
    if source is None:
        source = (ROOT / origin).read_text()
    stub = origin.endswith(".pyi")
    text = protocols(source) if stub else _rewrite_tokens(_drop_async_blocks(source, origin))
    text = f"# generated from {origin} by {TOOL}, do not edit\n" + text
    text = _ruff(["check", "--fix", "--quiet", "--select", "F401,I", "--exit-zero"], text, target)
    return _ruff(["format", "--quiet"], text, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("sources", nargs="*", help=f"async sources (default: all of {', '.join(PAIRS)})")
    options = parser.parse_args(argv)
    stale = []
    for origin in options.sources or PAIRS:
        origin = Path(origin).resolve().relative_to(ROOT).as_posix()
        target = PAIRS[origin]
        text = generate(origin, target)
        path = ROOT / target
        if not path.exists() or path.read_text() != text:
            stale.append(target)
            if not options.check:
                path.write_text(text)
    if stale:
        print(("out of date: " if options.check else "written: ") + ", ".join(stale))
    return 1 if options.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
