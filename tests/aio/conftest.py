"""Fixtures of the asyncio tests: ``run`` runs a coroutine on a fresh event loop (the default
one; ``loop`` parametrises a test over the default loop and uvloop, skipped when absent)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None
LOOPS = [
    pytest.param("asyncio", id="asyncio"),
    pytest.param(
        "uvloop", id="uvloop", marks=pytest.mark.skipif(not HAVE_UVLOOP, reason="uvloop is not installed")
    ),
]


def _loop_factory(kind: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


@pytest.fixture(params=LOOPS)
def loop(request: pytest.FixtureRequest) -> str:
    """The event loop a test runs on: ``"asyncio"`` or ``"uvloop"``."""
    return str(request.param)


@pytest.fixture
def run(request: pytest.FixtureRequest) -> Iterator[Run[Any]]:
    """``run(coro)``: its result, on a fresh loop of the test's ``loop`` (default asyncio),
    with asyncio's debug checks on the default loop."""
    kind = request.getfixturevalue("loop") if "loop" in request.fixturenames else "asyncio"
    with asyncio.Runner(loop_factory=_loop_factory(kind), debug=False) as runner:
        yield runner.run
