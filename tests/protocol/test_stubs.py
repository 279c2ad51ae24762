"""``_core.pyi`` is true of both cores: mypy's stubtest finds no difference between it and
the built Cython core, nor between it and the pure-Python twin (same names, signatures,
``__all__`` and read-only attributes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harness.cores import needs_cython

import fastlock
from fastlock import _core_py

pytestmark = pytest.mark.slow  # slow tier: mypy and stubtest

PACKAGE = Path(fastlock.__file__).resolve().parent
STUB = PACKAGE / "_core.pyi"


def stubtest(module: str, stubs: Path) -> str:
    """Run stubtest on ``module`` with the stubs under ``stubs``; return its findings."""
    environ = {**os.environ, "MYPYPATH": str(stubs)}  # an editable install hides the stubs from mypy
    command = [sys.executable, "-m", "mypy.stubtest", "--concise", module]
    done = subprocess.run(command, capture_output=True, text=True, env=environ, timeout=300, cwd=stubs)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.stdout.strip()


def stub_tree(tmp_path: Path, module: str) -> Path:
    """A package ``fastlock`` holding only ``_core.pyi`` as the stub of ``fastlock.<module>``."""
    (tmp_path / "fastlock").mkdir()
    (tmp_path / "fastlock" / "__init__.pyi").touch()
    shutil.copy(STUB, tmp_path / "fastlock" / f"{module}.pyi")
    return tmp_path


@needs_cython
def test_the_stub_matches_the_cython_core(tmp_path: Path) -> None:
    assert stubtest("fastlock._core", stub_tree(tmp_path, "_core")) == ""


def test_the_python_core_matches_the_same_stub(tmp_path: Path) -> None:
    assert stubtest("fastlock._core_py", stub_tree(tmp_path, "_core_py")) == ""


def test_a_difference_is_found(tmp_path: Path) -> None:
    """The check can fail: a stub naming a function the core lacks is a finding."""
    tree = stub_tree(tmp_path, "_core_py")
    with (tree / "fastlock" / "_core_py.pyi").open("a") as stub:
        stub.write("def decode_command(data: bytes) -> tuple[bytes, ...]: ...\n")
    assert "fastlock._core_py.decode_command is not present at runtime" in stubtest("fastlock._core_py", tree)


@pytest.mark.parametrize("name", ["Connection", "ReplyReader"])
def test_core_classes_are_final_in_both(name: str) -> None:
    assert getattr(getattr(_core_py, name), "__final__", False) is True  # typing.final marks it
