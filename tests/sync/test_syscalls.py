"""The hot path is one ``send`` and one ``recv`` system call per command (seen by strace)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

PROGRAM = """
import os, sys
import fastlock
client = fastlock.Client(sys.argv[1], impl=sys.argv[2])
script = client.register_script("return ARGV[1]")
script(["k"], ["warm"]); client.execute("PING")
os.write(2, b"<<<START\\n")
for i in range(5):
    script(["k"], [i])
    client.execute("SET", "k", i)
os.write(2, b">>>END\\n")
"""


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (apt-get install strace)")
def test_one_send_one_recv_per_command(redis_url: str, impl: str) -> None:
    done = subprocess.run(
        ["strace", "-f", "-e", "trace=network,read,write,poll,ppoll,select,pselect6,epoll_wait",
         sys.executable, "-c", PROGRAM, redis_url, impl],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    trace = done.stderr.split("<<<START", 1)[1].split(">>>END", 1)[0]
    calls = re.findall(r"^(?:\[pid\s+\d+\] )?(\w+)\(", trace, re.MULTILINE)
    calls = [name for name in calls if name != "write"]  # the marker writes
    assert calls == ["sendto", "recvfrom"] * 10, trace
