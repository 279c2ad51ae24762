"""Lock, read-write lock and queue options are typed and checked: ``mypy --strict`` flags a
misspelt or mistyped option at ``client.lock(...)`` / ``client.rwlock(...)`` /
``client.queue(...)``, and at run time every option is checked before use, the error naming it
(no raw ``TypeError`` from a comparison)."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import fastlock
from fastlock.locks.lock import Lock
from fastlock.locks.options import LockOptions
from fastlock.locks.readwrite import RWLockBase, RWLockOptions
from fastlock.locks.types import TTL_REQUIRED
from fastlock.queues.base import QueueBase, QueueOptions

SRC = Path(fastlock.__file__).resolve().parents[1]
# mypy does not see an editable install's import hook: point it at the source tree. An
# installed package (CI) is found by mypy itself, and site-packages may not be in MYPYPATH.
_MYPY_ENV = (
    os.environ if SRC.name in ("site-packages", "dist-packages") else {**os.environ, "MYPYPATH": str(SRC)}
)
CLIENT = fastlock.Client("redis://127.0.0.1:1")  # nothing here connects

LOCK_MISTAKES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"ttl": "30"}, fastlock.ArgumentTypeError, "ttl"),
    ({"ttl": -1}, fastlock.ArgumentError, "ttl"),
    ({"timeout": "1"}, fastlock.ArgumentTypeError, "timeout"),
    ({"timeout": float("nan")}, fastlock.ArgumentError, "timeout"),
    ({"limit": "3"}, fastlock.ArgumentTypeError, "limit"),
    ({"limit": True}, fastlock.ArgumentTypeError, "limit"),
    ({"limit": 0}, fastlock.ArgumentError, "limit"),
    ({"type": 5}, fastlock.ArgumentTypeError, "type"),
    ({"type": "until_lunch"}, fastlock.ArgumentError, "lock type"),
    ({"type": "until_expired", "ttl": None}, fastlock.ArgumentError, "ttl"),
    ({"ttl": TTL_REQUIRED}, fastlock.ArgumentError, "ttl=<seconds>"),  # no ttl: a required choice
    ({"job_id": 5}, fastlock.ArgumentTypeError, "job id"),
    ({"job_id": ""}, fastlock.ArgumentError, "job id"),
    ({"on_conflict": ["log"]}, fastlock.ArgumentTypeError, "on_conflict"),
    ({"on_conflict": "shrug"}, fastlock.ArgumentError, "conflict strategy"),
    ({"on_conflict": {"dequeue": "log"}}, fastlock.ArgumentError, "on_conflict"),
    ({"queue": 5}, fastlock.ArgumentTypeError, "queue"),
    ({"digest": 5}, fastlock.ArgumentTypeError, "digest"),
    ({"digest": "XYZ"}, fastlock.ArgumentError, "digest"),
]
QUEUE_MISTAKES: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"lease": "30"}, fastlock.ArgumentTypeError, "lease"),
    ({"lease": 0}, fastlock.ArgumentError, "lease"),
    ({"max_attempts": "5"}, fastlock.ArgumentTypeError, "max_attempts"),
    ({"max_attempts": 0}, fastlock.ArgumentError, "max_attempts"),
    ({"backoff": "1"}, fastlock.ArgumentTypeError, "backoff"),
    ({"backoff": -1}, fastlock.ArgumentError, "backoff"),
    ({"keep_completed": 1.5}, fastlock.ArgumentTypeError, "keep_completed"),
    ({"keep_completed": -1}, fastlock.ArgumentError, "keep_completed"),
    ({"prefix": 5}, fastlock.ArgumentTypeError, "prefix"),
    ({"prefix": "{}"}, fastlock.ArgumentError, "prefix"),
    ({"digester": "sha256"}, fastlock.ArgumentTypeError, "digester"),
]


@pytest.mark.parametrize(("options", "error", "named"), LOCK_MISTAKES, ids=str)
def test_lock_options_are_checked_up_front(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    options = {"ttl": 30, **options}  # ttl is required
    with pytest.raises(error, match=re.escape(named)):
        CLIENT.lock("report", **options)
    with pytest.raises(error, match=re.escape(named)):
        CLIENT.locks.lock("report", **options)


@pytest.mark.parametrize(("options", "error", "named"), QUEUE_MISTAKES, ids=str)
def test_queue_options_are_checked_up_front(
    options: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=re.escape(named)):
        CLIENT.queue("jobs", **options)


def test_value_errors_stay_value_errors() -> None:
    """The option errors keep their old bases: an ArgumentError is a ValueError, an
    ArgumentTypeError a TypeError."""
    with pytest.raises(ValueError):
        CLIENT.lock("report", limit=0, ttl=30)
    with pytest.raises(TypeError):
        CLIENT.lock("report", ttl="30")


def _keyword_options(function: Any, skip: set[str]) -> dict[str, Any]:
    parameters = inspect.signature(function).parameters.values()
    hints = get_type_hints(function)
    return {p.name: hints[p.name] for p in parameters if p.kind is p.KEYWORD_ONLY and p.name not in skip}


def test_the_typed_dicts_match_the_constructors() -> None:
    """LockOptions, RWLockOptions and QueueOptions spell the constructors' keywords, with the
    same types."""
    assert get_type_hints(LockOptions) == _keyword_options(Lock.__init__, {"name"})
    assert get_type_hints(RWLockOptions) == _keyword_options(RWLockBase.__init__, set())
    assert get_type_hints(QueueOptions) == _keyword_options(QueueBase.__init__, set())


SNIPPET = """
import fastlock

client = fastlock.Client()
client.lock("report", ttl=30, timeout=1.5, limit=2, type="while_executing", on_conflict="raise")
client.queue("jobs", lease=10, max_attempts=3, backoff=lambda attempt: 1.0, prefix="app")
client.lock("report", ttl="30")  # MISTAKE
client.lock("report", ttl=None, timeout=1.5)
client.lock("report", ttl=30, limt=2)  # MISTAKE
client.lock("report", ttl=30, timeout=None)  # MISTAKE
client.lock("report", timeout=10)  # MISTAKE
client.queue("jobs", max_attempts="3")  # MISTAKE
client.queue("jobs", leese=10)  # MISTAKE
client.locks.lock("report", ttl=30, job_id=7)  # MISTAKE
client.rwlock("doc", ttl=30, timeout=1.5, prefix="app")
client.rwlock("doc", ttl=None)
client.rwlock("doc")  # MISTAKE
client.rwlock("doc", ttl=30, tiemout=1)  # MISTAKE
"""


RQ_SNIPPET = """
from fastlock.contrib.rq import unique

@unique(ttl=600, type="until_executing", release_on_failure=False)
def report(day: str) -> int:
    return 1

@unique(ttl="600")  # MISTAKE
def late(day: str) -> None: ...

x: int = report("2026-12-01")
y: str = report("2026-12-01")  # MISTAKE
report(5)  # MISTAKE
"""


def _mypy_errors(tmp_path: Path, snippet: str) -> tuple[set[int], set[int], str]:
    """(lines marked MISTAKE, lines ``mypy --strict`` flags, its output) for ``snippet``."""
    source = tmp_path / "snippet.py"
    source.write_text(snippet)
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--no-error-summary", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_MYPY_ENV,
    )
    expected = {number for number, line in enumerate(snippet.splitlines(), 1) if line.endswith("# MISTAKE")}
    flagged = {int(m[1]) for m in re.finditer(r"snippet\.py:(\d+): error:", run.stdout)}
    return expected, flagged, run.stdout + run.stderr


def test_mypy_strict_flags_each_option_mistake(tmp_path: Path) -> None:
    """``mypy --strict`` on a snippet: the good calls pass, each line marked MISTAKE is an error."""
    expected, flagged, output = _mypy_errors(tmp_path, SNIPPET)
    assert len(expected) == 9
    assert flagged == expected, output


def test_mypy_strict_checks_the_rq_decorator(tmp_path: Path) -> None:
    """The lock options of ``@unique`` are typed, and the decorated function keeps its signature."""
    pytest.importorskip("rq")
    expected, flagged, output = _mypy_errors(tmp_path, RQ_SNIPPET)
    assert len(expected) == 3
    assert flagged == expected, output


def test_an_unknown_client_option_is_refused_naming_the_valid_ones() -> None:
    """Each transport takes the shared options and its own pool's, nothing else."""
    from fastlock.aio import Client as AsyncClient

    with pytest.raises(fastlock.UnknownOptionError, match=r"'max_in_flight'; the client options are busy"):
        fastlock.Client("redis://127.0.0.1:1", max_in_flight=3)
    with pytest.raises(fastlock.UnknownOptionError, match=r"'warmup' \(did you mean 'warm_up'\?\)"):
        AsyncClient("redis://127.0.0.1:1", warmup=True)
    with pytest.raises(TypeError, match="health_check_interval"):  # a TypeError, as before
        AsyncClient("redis://127.0.0.1:1", health_check_interval=1.0)
