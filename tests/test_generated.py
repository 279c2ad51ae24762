"""The files written by ``tools/async_to_sync.py`` (the sync shells from their asyncio sources,
the cores' Protocols from ``_core.pyi``): each one
regenerated in memory must be the file checked in (edit the async source, run the tool)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "tools" / "async_to_sync.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.mark.parametrize("origin", sorted(TOOL.PAIRS))
def test_the_generated_file_is_up_to_date(origin: str) -> None:
    target = TOOL.PAIRS[origin]
    written = (ROOT / target).read_text()
    assert written.startswith(f"# generated from {origin} by tools/async_to_sync.py, do not edit\n")
    assert TOOL.generate(origin, target) == written, f"{target} is stale: run python tools/async_to_sync.py"


def test_every_generated_file_has_its_source_in_the_table() -> None:
    marked = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "src").rglob("*.py")
        if path.read_text().startswith("# generated from ")
    }
    assert marked == set(TOOL.PAIRS.values())


def test_the_rewrite_rules() -> None:
    """ASYNC blocks, async/await, Awaitable, dotted and plain names, strings and f-strings."""
    source = '''"""Uses :class:`AsyncClusterClient` (≤ 2 await),
written by await ``await x``."""
import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

if True:  # ASYNC
    Gate = asyncio.Event
else:
    Gate = threading.Event

Send = Callable[[int], Awaitable[list[int]]]


class AsyncClusterClient:
    async def __aenter__(self) -> AsyncClusterClient:
        await asyncio.sleep(0)  # a comment kept
        async with self as again, self:
            pass
        return self

    if True:  # ASYNC

        async def only_async(self) -> None:
            pass

    def __repr__(self) -> str:
        return f"<fastlock.cluster.AsyncClusterClient {[x for x in ()]!r}>"
'''
    assert (
        TOOL.generate("src/fastlock/x_aio.py", "src/fastlock/x.py", source)
        == '''\
# generated from src/fastlock/x_aio.py by tools/async_to_sync.py, do not edit
"""Uses :class:`ClusterClient` (≤ 2 await),
written by await ``x``."""

import threading
import time
from collections.abc import Callable

Gate = threading.Event

Send = Callable[[int], list[int]]


class ClusterClient:
    def __enter__(self) -> ClusterClient:
        time.sleep(0)  # a comment kept
        with self as again, self:
            pass
        return self

    def __repr__(self) -> str:
        return f"<fastlock.ClusterClient {[x for x in ()]!r}>"
'''
    )


@pytest.mark.parametrize(
    "source",
    [
        "if True:  # ASYNC\n    x = 1\nelif y:\n    x = 2\n",
        "if 1:  # ASYNC\n    x = 1\n",
        "if True:  # ASYNC\n    if True:  # ASYNC\n        x = 1\n",
        "async def f():\n    return f'{await g()}'\n",
    ],
)
def test_what_the_rewrite_refuses(source: str) -> None:
    with pytest.raises((TOOL.GenerateError, SyntaxError)):
        TOOL.generate("src/fastlock/x_aio.py", "src/fastlock/x.py", source)


def test_the_protocols_of_a_stub() -> None:
    """The core's stub -> its Protocols: module variables as properties, module functions with
    ``self``, each class as ``Core<Name>`` (``@final`` dropped); a stub class named in a
    parameter is ``Any`` (a core takes its own objects), elsewhere its Protocol."""
    stub = """import socket
from typing import Any, final

__all__ = ["Box", "make"]

DEBUG: bool

def make(sock: socket.socket, n: int = 1) -> Box: ...

@final
class Box:
    size: int
    def __init__(self, other: Box) -> None: ...
    @property
    def twin(self) -> Box: ...
"""
    written = TOOL.generate("src/fastlock/x.pyi", "src/fastlock/x_api.py", stub)
    assert written.startswith("# generated from src/fastlock/x.pyi by tools/async_to_sync.py, do not edit\n")
    assert written.partition('."""\n\n')[2] == (
        '''from __future__ import annotations

import socket
from typing import Any, Protocol

__all__ = ["Core", "CoreBox"]


class CoreBox(Protocol):
    """``Box``."""

    size: int

    def __init__(self, other: Any) -> None: ...
    @property
    def twin(self) -> CoreBox: ...


class Core(Protocol):
    """A core module."""

    @property
    def DEBUG(self) -> bool: ...
    def make(self, sock: socket.socket, n: int = 1) -> CoreBox: ...
    @property
    def Box(self) -> type[CoreBox]: ...
'''
    )
