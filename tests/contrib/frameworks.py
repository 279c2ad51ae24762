"""Helpers of the integration tests: run real framework processes with this folder importable."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def env() -> dict[str, str]:
    """The environment of a worker or producer process: this folder on the import path."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def start(args: Sequence[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        list(args), env=env(), cwd=HERE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def runs(redis: Any, key: str) -> list[tuple[float, float, int]]:
    """The executions logged under ``runs:<key>``: (start, end, pid), by start."""
    return sorted(tuple(json.loads(item)) for item in redis.lrange(f"runs:{key}", 0, -1))


def overlaps(executions: list[tuple[float, float, int]]) -> list[tuple[Any, Any]]:
    """Pairs of executions (sorted by start) where one started before the previous ended."""
    return [(a, b) for a, b in itertools.pairwise(executions) if b[0] < a[1]]
