"""``python -m fastlock bench`` (README command 1) run as a subprocess on a tiny scale: every
fastlock workload is reported with its commands and round trips, its ratios to the same bytes
replayed from C and Python, and its client instructions per operation (callgrind), or the
table says why the instructions were not measured."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fastlock.tools import instructions
from fastlock.tools.workloads import ALL

pytestmark = pytest.mark.slow  # slow tier: runs the benchmarks


def test_every_workload_is_reported_against_its_floor_and_in_instructions(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "fastlock", "bench", "--scale", "0.02", "--rounds", "1", "--no-progress"]
    run = subprocess.run([*command, "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    results = {row["name"]: row for row in json.loads(out.read_text())["results"]}
    missing = instructions.unavailable()
    for workload in (w for w in ALL if w.counted):
        row = results[workload.name]
        assert row["commands_per_op"] > 0 and row["round_trips_per_op"] > 0, row
        assert row["vs_same_bytes_c"] > 0 and row["vs_same_bytes_python"] > 0, row
        if missing is None:
            assert row["instructions_per_op"] > 1000, row  # a round trip alone costs thousands
        else:
            assert "instructions_per_op" not in row, row
    if missing is None:
        assert "client instructions/op not measured" not in run.stdout
    else:
        assert f"client instructions/op not measured: {missing}" in run.stdout


def test_the_asyncio_table_has_every_workload_on_both_loops() -> None:
    """``bench --asyncio``: a row per asyncio workload (fastlock's with its ratio to
    redis.asyncio or to redis-benchmark -c 1 -P 64) on the default loop, and on uvloop when
    installed."""
    from fastlock.tools.aio_workloads import ALL as AIO

    command = [sys.executable, "-m", "fastlock", "bench", "--asyncio", "--scale", "0.02", "--rounds", "1"]
    run = subprocess.run([*command, "--no-instructions"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    loops = ["asyncio"] + (["uvloop"] if importlib.util.find_spec("uvloop") else [])
    for loop in loops:
        assert f"fastlock.aio on the {loop} loop" in run.stdout
        for workload in AIO:
            row = next(line for line in run.stdout.splitlines() if f"aio ({loop}): {workload.name} |" in line)
            if workload.versus is not None and (
                "redis.asyncio" in workload.versus or shutil.which("redis-benchmark")
            ):
                assert re.search(r"\| [0-9.]+x \|", row), row
