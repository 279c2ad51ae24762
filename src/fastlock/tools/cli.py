"""``python -m fastlock bench`` measures fastlock on this machine; ``python -m fastlock demo``
takes and releases a lock and calls a script. Without ``--url`` both start a private
:class:`~fastlock.testing.servers.TempServer` for the run (``bench`` prefers ``redis-server``
from PATH). ``python -m fastlock locks ...`` and ``python -m fastlock queue ...`` are the
admin commands (:mod:`fastlock.tools.admin`), run against ``--url`` (default
``$FASTLOCK_URL``, else ``redis://127.0.0.1:6379/0``); ``python -m fastlock metrics`` serves
queue depths and lock holders for Prometheus (:mod:`fastlock.tools.exporter`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import Client, __impl__, __version__
from ..exceptions import ArgumentError
from ..testing.servers import TempServer
from . import admin, exporter, instructions, workloads
from .bench import EVALSHA_SCRIPT, Figures, pin, render_table, run_workloads
from .c_floor import c_floor
from .floor import replay_binary


def demo(url: str) -> None:
    """Take and release a lock (with fencing tokens), claim and complete a job, call a script."""
    with Client(url) as client:
        print(f"fastlock {__version__} ({__impl__} core) on {client.params.address}")
        first, second = client.lock("demo", ttl=30), client.lock("demo", ttl=30)
        print(f"lock demo, job A          -> fencing token {first.acquire()!r}")
        print(f"lock demo, job B (held)   -> {second.acquire(blocking=False)!r}")
        print(f"release by job A          -> frees token {first.release()!r}")
        print(f"lock demo, job B          -> fencing token {second.acquire()!r}")
        second.release()
        queue = client.queue("demo", lease=30)
        queue.enqueue(b"send invoice 42")
        for job in queue.claim(10):
            print(f"claimed job {job.id} (attempt {job.attempt}, token {job.token}): {job.payload!r}")
            queue.complete(job)
        print(f"queue stats               -> {queue.stats()}")
        client.execute("SET", "demo:key", "mine")
        print(f"release_if_owner (wrong)  -> {client.call('release_if_owner', ['demo:key'], ['theirs'])!r}")
        print(f"release_if_owner (right)  -> {client.call('release_if_owner', ['demo:key'], ['mine'])!r}")
        cycles = 5_000
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(cycles):
            first.acquire()
            first.release()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"{cycles} lock acquire+release cycles: {cycles / wall:,.0f} cycles/s, "
            f"{cpu / cycles * 1e6:.1f} µs client CPU per cycle (2 round trips each)"
        )


def _progress_bar(done: int, total: int, name: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[:40]:40s}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _count_instructions(
    figures: list[Figures], progress: Callable[[int, int, str], None] | None
) -> str | None:
    """Fill in the client instructions per operation of the counted workloads (callgrind, a
    private server of its own); returns why not when valgrind or gcc is missing."""
    why = instructions.unavailable()
    if why:
        return why
    counted = [f for f in figures if f.commands_per_op is not None]
    if progress is not None:
        progress(0, 1, "client instructions (callgrind)")
    measured = instructions.measure([instructions.WORKLOAD + f.name for f in counted], impl=__impl__)
    if progress is not None:
        progress(1, 1, "done")
    for f in counted:
        f.instructions_per_op = measured.per_op[instructions.WORKLOAD + f.name]
    return None


def bench(url: str, args: argparse.Namespace, client_cpu: int | None) -> int:
    """Measure the workloads and print the table (and write JSON when asked)."""
    chosen = list(workloads.ALL)
    with Client(url) as client:
        client.execute("SCRIPT", "LOAD", EVALSHA_SCRIPT)
        address = client.params.address
    progress = None if args.no_progress else _progress_bar
    with replay_binary() as replay:
        figures, skipped = run_workloads(
            url,
            chosen,
            rounds=args.rounds,
            scale=args.scale,
            progress=progress,
            replay=replay,
            cpu=client_cpu,
        )
    floor = c_floor(url, cpu=client_cpu, requests=max(1_000, int(50_000 * args.scale)))
    not_counted = None if args.no_instructions else _count_instructions(figures, progress)
    print(f"fastlock {__version__} ({__impl__} core) on {address}; medians of {args.rounds} rounds")
    print(render_table(figures, chosen, floor))
    if not_counted:
        print(f"\nclient instructions/op not measured: {not_counted}")
    if floor is None:
        print("\nno redis-benchmark/valkey-benchmark on PATH: no C floor to compare with")
    for line in skipped:
        print(f"skipped {line}")
    if skipped:
        print("the vs redis-py column needs redis-py: pip install redis (or, in a checkout, '.[bench]')")
    if args.json:
        report = {
            "version": __version__,
            "impl": __impl__,
            "server": address,
            "rounds": args.rounds,
            "results": [f.as_dict() for f in figures],
            "c_floor": floor.as_dict() if floor else None,
            "skipped": skipped,
        }
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)
    return 0


def add_web_command(commands: Any) -> None:
    """The ``web`` command: the dashboard (:mod:`fastlock.web`)."""
    run_web = commands.add_parser("web", help="serve the web dashboard of queues and locks")
    run_web.add_argument("--url", default=os.environ.get("FASTLOCK_URL", admin.DEFAULT_URL),
                         help=f"server URL (default: $FASTLOCK_URL, else {admin.DEFAULT_URL})")  # fmt: skip
    run_web.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    run_web.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    run_web.add_argument("--queue", action="append", default=[], help="a queue of the overview (repeat)")
    run_web.add_argument("--queue-prefix", default="fl", help="the queues' key prefix (default fl)")
    run_web.add_argument("--lock-prefix", default="fastlock", help="the lock namespace (default fastlock)")
    run_web.add_argument("--buckets", type=int, default=1024, help="the lock namespace's buckets")
    run_web.add_argument("--read-only", action="store_true", help="hide and refuse every change")
    run_web.add_argument("--token", default=os.environ.get("FASTLOCK_WEB_TOKEN"),
                         help="require this bearer token (default: $FASTLOCK_WEB_TOKEN)")  # fmt: skip
    basic = os.environ.get("FASTLOCK_WEB_BASIC_AUTH")
    run_web.add_argument("--basic-auth", default=basic, metavar="USER:PASS",
                         help="require basic auth (default: $FASTLOCK_WEB_BASIC_AUTH)")  # fmt: skip


def web(args: argparse.Namespace, error: Callable[[str], None]) -> int:
    """Serve the dashboard until interrupted: 2 when a setting is refused or the extra is missing."""
    try:
        from .. import web as dashboard
    except ImportError as exc:
        error(f"the dashboard needs its extra: pip install 'fastlock[web]' ({exc})")
        return 2
    try:
        auth = dashboard.Auth(args.token or None, args.basic_auth or None)
        dashboard.serve(
            args.url, host=args.host, port=args.port, auth=auth, queues=args.queue,
            queue_prefix=args.queue_prefix, lock_prefix=args.lock_prefix, buckets=args.buckets,
            read_only=args.read_only,
        )  # fmt: skip
    except ArgumentError as exc:
        error(f"usage: {exc}")
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastlock", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="acquire and release a lock, call a script")
    run_bench = commands.add_parser("bench", help="measure locks, claims and the EVALSHA round trip")
    for command in (run_demo, run_bench):
        command.add_argument("--url", help="server URL (default: start a private server)")
    run_bench.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    run_bench.add_argument("--rounds", type=int, default=5, help="rounds per workload (medians are shown)")
    run_bench.add_argument(
        "--scale", type=float, default=1.0, help="multiply every workload's operation count"
    )
    run_bench.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    run_bench.add_argument(
        "--no-instructions",
        action="store_true",
        help="skip the client instructions per operation (measured under valgrind when it is on PATH)",
    )
    run_bench.add_argument(
        "--asyncio", action="store_true",
        help="the asyncio client's table instead (default loop and uvloop), beside redis.asyncio",
    )  # fmt: skip
    run_bench.add_argument(
        "--regime", choices=("same", "cross"), default="same",
        help="pin client and private server to one CPU (same) or to two (cross)",
    )  # fmt: skip
    admin.add_commands(commands, admin.common_options())
    add_web_command(commands)
    exporter.add_command(commands, admin.DEFAULT_URL)
    args = parser.parse_args(argv)
    if args.command == "metrics":
        return exporter.serve(args)
    if args.command in ("locks", "queue"):
        return admin.run(args, lambda message: print(f"{parser.prog}: {message}", file=sys.stderr))
    if args.command == "web":
        return web(args, lambda message: print(f"{parser.prog}: {message}", file=sys.stderr))
    with contextlib.ExitStack() as stack:
        client_cpu = server_cpu = None
        if args.command == "bench":
            server_cpu, client_cpu = (1, 1) if args.regime == "same" else (1, 0)
            if not shutil.which("taskset") or (os.cpu_count() or 1) < 2:
                server_cpu = client_cpu = None
            pin(client_cpu)
        if args.url:
            url = args.url
        else:
            binary = shutil.which("redis-server") if args.command == "bench" else None
            url = stack.enter_context(TempServer(binary, cpu=server_cpu)).unix_url
        if args.command == "demo":
            demo(url)
            return 0
        if args.asyncio:
            from .aio_bench import bench_asyncio

            return bench_asyncio(url, args, client_cpu)
        return bench(url, args, client_cpu)
