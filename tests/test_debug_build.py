"""The ``FASTLOCK_DEBUG=1`` build of the Cython core: its invariant checks are compiled in and
catch a connection left out of step with its server; the release build has none of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness.cores import CYTHON_CORE, needs_cython

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.c_extension, needs_cython]

# A server that answers one PING twice: the second reply stays in the reader. The release build
# hands it out as the reply of the next command; the debug build refuses to send that command.
OUT_OF_STEP = """
import socket, sys
import fastlock._core as core
ours, server = socket.socketpair()
conn = core.Connection(ours)
server.sendall(b"+PONG\\r\\n+STALE\\r\\n")
assert conn.execute(("PING",)) == b"PONG"
try:
    print(core.DEBUG, conn.execute(("PING",)))
except AssertionError as exc:
    print(core.DEBUG, exc)
"""
OUTCOME = {
    False: "False b'STALE'",
    True: "True fastlock._core invariant broken: unread reply bytes in the reader before a command",
}


def run(code: str, *path: Path) -> str:
    env = {**os.environ, "FASTLOCK_IMPL": "cython", "PYTHONPATH": os.pathsep.join(map(str, path))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def debug_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sources built in place with FASTLOCK_DEBUG=1; returns its ``src``."""
    tree = tmp_path_factory.mktemp("debug-build")
    shutil.copy(ROOT / "setup.py", tree)
    shutil.copytree(ROOT / "lua", tree / "lua")
    shutil.copytree(
        ROOT / "src" / "fastlock",
        tree / "src" / "fastlock",
        ignore=shutil.ignore_patterns("*.so", "*.c", "*.html", "__pycache__"),
    )
    env = {**os.environ, "FASTLOCK_DEBUG": "1"}
    env.pop("FASTLOCK_NO_EXTENSIONS", None)
    command = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return tree / "src"


def test_the_installed_build_behaves_as_its_debug_flag_says() -> None:
    assert CYTHON_CORE is not None
    assert run(OUT_OF_STEP) == OUTCOME[CYTHON_CORE.DEBUG]  # a normal install: False b'STALE'


def test_the_debug_build_refuses_to_send_with_a_reply_unread(debug_build: Path) -> None:
    where = run("import fastlock._core as core; print(core.__file__)", debug_build)
    assert Path(where).is_relative_to(debug_build)
    assert run(OUT_OF_STEP, debug_build) == OUTCOME[True]
