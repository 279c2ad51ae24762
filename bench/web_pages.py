"""Render time of every dashboard page on big data (a measurement, not a test):

    python bench/web_pages.py [--jobs 1000000] [--locks 100000] [--url URL] [--rounds 20]

Without ``--url`` a private redis-server is started. It fills queue ``big`` (``--jobs`` ready
jobs, plus 10,000 delayed, 1,000 active and 1,000 dead) and ``--locks`` tracked locks, serves
the dashboard with uvicorn on a free loopback port, and prints the median and worst time of
``--rounds`` GETs of each page (wall time of the whole request, from this process)."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import statistics
import threading
import time

import uvicorn

import fastlock
import fastlock.aio
from fastlock.testing.servers import TempServer, free_port
from fastlock.web import app


def fill(url: str, jobs: int, locks: int) -> tuple[str, str, str]:
    """The data; returns a dead job's id, a ready job's id deep in the backlog and a lock's digest."""
    with fastlock.Client(url) as client:
        queue = client.queue("big", max_attempts=1, lease=3600)
        started = time.perf_counter()
        chunk = 100_000
        deep = ""
        for done in range(0, jobs, chunk):
            ids = queue.enqueue_many([b"x" * 64] * min(chunk, jobs - done))
            deep = deep or ids[len(ids) // 2]
        queue.claim(1000)  # the oldest 1,000 become active, then another 1,000 die
        dead = ""
        for _ in range(1000):
            (job,) = queue.claim(1)
            queue.fail(job, "RuntimeError: boom\nTraceback ...", dead=True)
            dead = job.id
        queue.enqueue_many([b"later"] * 10_000, delay=3600)
        manager = fastlock.LockManager(client, max_history=100)
        digest, held = "", 0
        for i in range(locks):
            lock = manager.lock(f"lock-{i}", ttl=3600, job_id=f"job-{i}")
            held += lock.acquire(blocking=False) is not None
            digest = lock.digest
        print(f"filled {jobs:,} jobs and {held:,} held locks in {time.perf_counter() - started:.1f} s")
        print(f"stats: {queue.stats()}")
    return dead, deep, digest


def measure(base: str, paths: list[str], rounds: int) -> None:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port))
    print(f"{'page':60s} {'median ms':>10s} {'worst ms':>10s} {'bytes':>8s}")
    for path in paths:
        times, size = [], 0
        for _ in range(rounds):
            started = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            times.append((time.perf_counter() - started) * 1000)
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}: {body[:300]!r}")
            size = len(body)
        print(f"{path[:60]:60s} {statistics.median(times):10.1f} {max(times):10.1f} {size:8d}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="server URL (default: a private redis-server)")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--locks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(TempServer()).url
        dead, deep, digest = fill(url, args.jobs, args.locks)
        port = free_port()
        board = app(fastlock.aio.Client(url), queues=["big"], close_client=True)
        server = uvicorn.Server(uvicorn.Config(board, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        middle = args.jobs // 2
        paths = [
            "/",
            "/queues/big?state=ready",
            f"/queues/big?state=ready&offset={middle}",
            "/queues/big?state=delayed",
            "/queues/big?state=active",
            "/queues/big?state=dead",
            f"/queues/big/jobs/{dead}",
            f"/queues/big/jobs/{deep}",
            "/queues/big/dead/requeue?all=1",
            "/locks",
            "/locks?cursor=512:",
            f"/locks/{digest}",
            f"/locks/{digest}/delete",
        ]
        try:
            measure(f"http://127.0.0.1:{port}", paths, args.rounds)
        finally:
            server.should_exit = True
            thread.join()


if __name__ == "__main__":
    main()
