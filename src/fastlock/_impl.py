"""Choose the core implementation: ``FASTLOCK_IMPL=cython|python``, else the best one.

Asking for an implementation that cannot be imported is an error; without a request the
Cython core is used when it imports and the pure-Python core otherwise.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, cast

from .protocol.core import Core, CoreConnection, CoreReader

if TYPE_CHECKING:  # mypy checks both cores against the interface (a module's classes one by one)
    from . import _core, _core_py

    _CORES: tuple[Core, ...] = (_core, _core_py)
    _CONNECTIONS: tuple[type[CoreConnection], ...] = (_core.Connection, _core_py.Connection)
    _READERS: tuple[type[CoreReader], ...] = (_core.ReplyReader, _core_py.ReplyReader)

__all__ = ["IMPLEMENTATIONS", "load_core"]

IMPLEMENTATIONS = {"cython": "fastlock._core", "python": "fastlock._core_py"}


def load_core(name: str | None = None) -> tuple[str, Core]:
    """Return ``(name, module)`` of the requested core, or the best available one."""
    requested = name or os.environ.get("FASTLOCK_IMPL", "").strip().lower() or None
    if requested is not None:
        if requested not in IMPLEMENTATIONS:
            raise ImportError(
                f"unknown fastlock implementation {requested!r}; choose one of {', '.join(IMPLEMENTATIONS)}"
            )
        try:
            return requested, _import(IMPLEMENTATIONS[requested])
        except ImportError as exc:
            raise ImportError(f"fastlock implementation {requested!r} cannot be imported: {exc}") from exc
    failures = []
    for impl, module in IMPLEMENTATIONS.items():
        try:
            return impl, _import(module)
        except ImportError as exc:
            failures.append(f"{impl}: {exc}")
    raise ImportError("no fastlock implementation can be imported: " + "; ".join(failures))


def _import(module: str) -> Core:
    """The core module ``module``, typed by the interface both cores implement."""
    return cast("Core", importlib.import_module(module))
