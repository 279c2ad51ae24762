"""The size of the long scenarios (chaos, fleets, fuzz): ``FASTLOCK_CHAOS=full`` (the default) or
``short``. CI runs them full in one leg (the README's command) and short in the others, so each
scenario runs on every Python and core, at its full size once. A scenario's own variable (such as
``FASTLOCK_FLEET_JOBS``) still wins."""

from __future__ import annotations

import os

SIZE = os.environ.get("FASTLOCK_CHAOS", "full")
if SIZE not in ("full", "short"):
    raise ValueError(f"FASTLOCK_CHAOS must be 'full' or 'short', not {SIZE!r}")


def sized(full: int, short: int, variable: str | None = None) -> int:
    """``full`` or ``short`` by ``FASTLOCK_CHAOS``, unless ``variable`` is set in the environment."""
    if variable and os.environ.get(variable):
        return int(os.environ[variable])
    return full if SIZE == "full" else short
