"""The server flavours a bench script runs on: ``--flavour`` (repeatable; all by default)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from fastlock.testing.servers import FLAVOURS, find_binaries


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--flavour redis|valkey``, repeatable."""
    parser.add_argument("--flavour", choices=FLAVOURS, action="append")


def binaries(chosen: list[str] | None) -> Iterator[tuple[str, str]]:
    """``(flavour, server binary)`` of each flavour chosen (all if none), in order; one whose
    server is not found is printed with the reason and left out."""
    found = find_binaries()
    for flavour in chosen or FLAVOURS:
        binary, why = found[flavour]
        if binary is None:
            print(f"{flavour}: unavailable ({why})")
            continue
        yield flavour, binary
