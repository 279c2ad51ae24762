"""``python -m fastlock demo [--url URL]``: take and release a lock and call a script
against a server (by default a private one started for the run)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from importlib import resources

from . import Client, __impl__, __version__
from .embedded import EmbeddedServer


def _release_script_source() -> str:
    return (resources.files("fastlock") / "lua" / "release_if_owner.lua").read_text()


def demo(url: str) -> None:
    """Acquire a lock, fail to take it twice, release it by compare-and-delete, time it."""
    with Client(url) as client:
        release = client.register_script(_release_script_source())
        token = os.urandom(8).hex()
        print(f"fastlock {__version__} ({__impl__} core) on {client.params.address}")
        taken = client.execute("SET", "demo:lock", token, "NX", "PX", 30_000)
        print(f"acquire demo:lock            -> {taken!r}")
        again = client.execute("SET", "demo:lock", "other", "NX", "PX", 30_000)
        print(f"acquire again (held)         -> {again!r}")
        print(f"release with a wrong token   -> {release(keys=['demo:lock'], args=['not-mine'])!r}")
        print(f"release with our token       -> {release(keys=['demo:lock'], args=[token])!r}")
        rounds = 5_000
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(rounds):
            client.execute("SET", "demo:lock", token, "NX", "PX", 30_000)
            release(keys=["demo:lock"], args=[token])
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"{rounds} acquire+release cycles: {rounds / wall:,.0f} cycles/s, "
            f"{cpu / rounds * 1e6:.1f} µs client CPU per cycle (2 round trips each)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastlock", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="acquire and release a lock, call a script")
    run_demo.add_argument("--url", help="server URL (default: start a private server)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(EmbeddedServer()).url
        demo(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
