"""The sync shells written by ``tools/async_to_sync.py`` from their asyncio sources: each one
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
    source = '''"""Uses :class:`AsyncClusterClient`."""
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
"""Uses :class:`ClusterClient`."""

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
