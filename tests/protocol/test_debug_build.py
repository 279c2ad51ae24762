"""The ``FASTLOCK_DEBUG=1`` build of the Cython core builds, loads with ``DEBUG`` true (its
invariant checks compiled in) and behaves as the release build on a connection out of step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness.cores import CYTHON_CORE, needs_cython

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.c_extension, needs_cython, pytest.mark.slow]  # slow tier: builds the core

# A server that answers one PING twice. Both builds close the connection at the stray reply
# (ProtocolError); the debug build additionally checks, before every command, that nothing is
# left unsent or unread, and reports which build is loaded in ``DEBUG``.
OUT_OF_STEP = """
import socket, sys
import fastlock._core as core
from fastlock import ProtocolError
ours, server = socket.socketpair()
conn = core.Connection(ours)
server.sendall(b"+PONG\\r\\n+STALE\\r\\n")
try:
    print(core.DEBUG, conn.execute(("PING",)))
except ProtocolError as exc:
    print(core.DEBUG, type(exc).__name__, conn.broken)
"""
OUTCOME = {False: "False ProtocolError True", True: "True ProtocolError True"}


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
    assert run(OUT_OF_STEP) == OUTCOME[CYTHON_CORE.DEBUG]


def test_the_debug_build_loads_and_keeps_the_connection_in_step(debug_build: Path) -> None:
    where = run("import fastlock._core as core; print(core.__file__)", debug_build)
    assert Path(where).is_relative_to(debug_build)
    assert run(OUT_OF_STEP, debug_build) == OUTCOME[True]
