"""``python -m fastlock metrics``: a standalone Prometheus exporter (extra ``fastlock[prometheus]``).

It serves :class:`fastlock.metrics.prometheus.Collector` on ``--addr``:``--port`` (default
9108): the gauges of the ``--queue`` and ``--lock`` names given, read from ``--url`` at most
every ``--every`` seconds when scraped, and the events of this process (none but its own
reads: a fleet's client-side figures come from each worker process's own collector).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from typing import Any

from .. import Client

__all__ = ["add_command", "serve"]

DEFAULT_PORT = 9108


def add_command(commands: Any, default_url: str) -> None:
    """Add the ``metrics`` command to the subparsers ``commands``."""
    run = commands.add_parser("metrics", help="serve queue depths and lock holders for Prometheus")
    run.add_argument("--url", default=os.environ.get("FASTLOCK_URL", default_url), help="server URL")
    run.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT})")
    run.add_argument("--addr", default="0.0.0.0", help="address to listen on (default: all)")
    run.add_argument("--queue", action="append", default=[], help="a queue to watch (repeat for more)")
    run.add_argument("--lock", action="append", default=[], help="a lock (by name) to watch (repeat)")
    run.add_argument("--prefix", default="fl", help="the queues' key prefix (default fl)")
    run.add_argument("--every", type=float, default=10.0, help="most seconds between two reads")


def serve(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """Serve until SIGTERM or SIGINT (or ``stop`` is set)."""
    from prometheus_client import CollectorRegistry, start_http_server

    from ..metrics import prometheus

    stop = stop or threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    registry = CollectorRegistry()
    collector = prometheus.register(registry)
    with Client(args.url) as client:
        queues = [client.queue(name, prefix=args.prefix) for name in args.queue]
        locks = [client.lock(name, ttl=None) for name in args.lock]  # (read only: its holders)
        collector.watch(queues, locks, every=args.every)
        server, thread = start_http_server(args.port, args.addr, registry=registry)
        print(f"serving fastlock metrics of {client.params.address} on {args.addr}:{args.port}", flush=True)
        try:
            stop.wait()
        finally:
            server.shutdown()
            thread.join(5)
    return 0
