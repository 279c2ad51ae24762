"""The same-bytes floor (``fastlock.tools.floor``): a workload's writes recorded through the
relay and replayed from C and from Python make the server do the same work as fastlock."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import fastlock
from fastlock.testing.servers import TempServer
from fastlock.tools import floor
from fastlock.tools.workloads import ALL

pytestmark = pytest.mark.slow  # slow tier: compiles and runs the C floor

OPS = 50


def _evalsha_calls(url: str) -> int:
    with fastlock.Client(url) as client:
        stats = client.execute("INFO", "commandstats").decode()
    found = re.search(r"^cmdstat_evalsha:calls=(\d+)", stats, re.M)
    return int(found.group(1)) if found else 0


@pytest.mark.parametrize("name", ["lock acquire + release", "job enqueue -> claim -> complete, unbatched"])
def test_replays_do_what_fastlock_did(private_server: TempServer, tmp_path: Path, name: str) -> None:
    (workload,) = (w for w in ALL if w.name == name)
    url = private_server.url
    recording = floor.record(url, workload.setup, OPS)
    timed = recording.writes[recording.prefix :]
    assert len(timed) == 2 * OPS  # two round trips per operation, none lost or merged
    assert all(commands == 1 and data.startswith(b"*") for commands, data in timed)
    recording.save(tmp_path / "recording")
    for replay in ("c", "python"):
        before = _evalsha_calls(url)
        if replay == "c":
            if shutil.which("gcc") is None:
                continue
            binary = floor.build_replay(str(tmp_path))
            assert binary is not None
            seconds = floor.replay_c(binary, url, tmp_path / "recording")
        else:
            seconds = floor.replay_python(url, recording)
        assert seconds > 0
        prefix_calls = sum(data.count(b"EVALSHA") for _, data in recording.writes[: recording.prefix])
        assert _evalsha_calls(url) - before == 2 * OPS + prefix_calls
