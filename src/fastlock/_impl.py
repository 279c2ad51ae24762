"""Choose the core implementation: ``FASTLOCK_IMPL=cython|python``, else the best one.

Asking for an implementation that cannot be imported is an error; without a request the
Cython core is used when it imports and the pure-Python core otherwise.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["IMPLEMENTATIONS", "load_core"]

IMPLEMENTATIONS = {"cython": "fastlock._core", "python": "fastlock._core_py"}


def load_core(name: str | None = None) -> tuple[str, ModuleType]:
    """Return ``(name, module)`` of the requested core, or the best available one."""
    requested = name or os.environ.get("FASTLOCK_IMPL", "").strip().lower() or None
    if requested is not None:
        if requested not in IMPLEMENTATIONS:
            raise ImportError(
                f"unknown fastlock implementation {requested!r}; choose one of {', '.join(IMPLEMENTATIONS)}"
            )
        try:
            return requested, importlib.import_module(IMPLEMENTATIONS[requested])
        except ImportError as exc:
            raise ImportError(f"fastlock implementation {requested!r} cannot be imported: {exc}") from exc
    failures = []
    for impl, module in IMPLEMENTATIONS.items():
        try:
            return impl, importlib.import_module(module)
        except ImportError as exc:
            failures.append(f"{impl}: {exc}")
    raise ImportError("no fastlock implementation can be imported: " + "; ".join(failures))
