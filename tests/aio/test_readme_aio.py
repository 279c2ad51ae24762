"""The README's asyncio example, run as written (its URL swapped for the test server's)."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

Run = Callable[[Coroutine[Any, Any, Any]], Any]
"""The ``run`` fixture (tests/aio/conftest.py): a coroutine's result, run on a fresh loop."""

README = Path(__file__).resolve().parents[2] / "README.md"


def example() -> str:
    text = README.read_text()
    section = text[text.index("### asyncio: locks, a queue and a worker") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found[1]


def test_the_readme_async_example_runs(run: Run, redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = example()
    assert code.rstrip().endswith("asyncio.run(main())")
    namespace: dict[str, Any] = {}
    exec(code.rstrip().removesuffix("asyncio.run(main())"), namespace)  # the README's own code
    run(namespace["main"](redis_url))
    assert capsys.readouterr().out == "b'payload'\n"
