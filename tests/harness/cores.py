"""The two cores under test. The Cython one is missing only from a pure-Python install
(``FASTLOCK_NO_EXTENSIONS=1``): its tests are then collected and skipped, saying why."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest


def _import_cython_core() -> tuple[ModuleType | None, str]:
    try:
        return importlib.import_module("fastlock._core"), ""
    except ImportError as exc:
        return None, f"the Cython core fastlock._core cannot be imported ({exc})"


CYTHON_CORE, CYTHON_MISSING = _import_cython_core()
AVAILABLE = ["cython", "python"] if CYTHON_CORE is not None else ["python"]
"""Names of the cores this install can run (for FASTLOCK_IMPL and ``impl=``)."""

needs_cython = pytest.mark.skipif(CYTHON_CORE is None, reason=CYTHON_MISSING)
"""For tests of the Cython core itself; they skip, with the import error, when it is absent."""


def core_params(cython: Any, python: Any) -> list[Any]:
    """Parameters ``cython`` and ``python`` (ids alike); the first is marked ``c_extension``
    and skipped, with the import error, when the Cython core is absent."""
    return [
        pytest.param(cython, id="cython", marks=[pytest.mark.c_extension, needs_cython]),
        pytest.param(python, id="python"),
    ]
