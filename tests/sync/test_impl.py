"""Implementation selection (FASTLOCK_IMPL) and the source tree's own hygiene."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from harness.cores import AVAILABLE, core_params

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "FASTLOCK_IMPL"} | env
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60
    )


@pytest.mark.parametrize("impl", core_params("cython", "python"))
def test_fastlock_impl_chooses_the_core(impl: str) -> None:
    done = _python("import fastlock; print(fastlock.__impl__, fastlock.Client().impl)", FASTLOCK_IMPL=impl)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [impl, impl]


def test_default_is_the_best_core_this_install_has() -> None:
    done = _python("import fastlock; print(fastlock.__impl__)")
    assert done.stdout.strip() == AVAILABLE[0], done.stderr  # cython unless it is not built


def test_unknown_implementation_is_an_import_error() -> None:
    done = _python("import fastlock", FASTLOCK_IMPL="rust")
    assert done.returncode != 0 and "unknown fastlock implementation 'rust'" in done.stderr


def test_requested_implementation_that_cannot_import_is_an_error() -> None:
    code = "import sys; sys.modules['fastlock._core'] = None; import fastlock"
    done = _python(code, FASTLOCK_IMPL="cython")
    assert done.returncode != 0 and "fastlock implementation 'cython' cannot be imported" in done.stderr
    fallback = _python(code + "; print(fastlock.__impl__)")
    assert fallback.returncode == 0 and fallback.stdout.strip() == "python"


def _tool_is_clean(*arguments: str) -> None:
    """Run ``python <arguments>`` in the repository root; a missing tool fails (the test extra has it)."""
    # this environment's scripts first on PATH: cython-lint runs pycodestyle by name
    path = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    environ = {**os.environ, "PATH": path}
    command = [sys.executable, *arguments]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, env=environ)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff_clean(command: list[str]) -> None:
    _tool_is_clean("-m", "ruff", *command)


def test_mypy_strict_clean() -> None:
    _tool_is_clean("-m", "mypy")  # strict, over the files listed in pyproject.toml


def test_cython_lint_clean() -> None:
    package = ROOT / "src" / "fastlock"
    sources = sorted(str(path) for pattern in ("*.pyx", "*.pxd", "*.pxi") for path in package.rglob(pattern))
    assert sources
    # cython-lint has no ``python -m`` entry point: call its main with this interpreter
    _tool_is_clean("-c", "import sys; from cython_lint.cython_lint import main; sys.exit(main())", *sources)
