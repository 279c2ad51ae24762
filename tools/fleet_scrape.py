"""A small fleet, scraped: what a Prometheus server sees of fastlock workers (docs/observability.md).

A private redis-server; two worker processes, each with the collector registered in one line
(``prometheus.register()``, the server gauges of its queue watched) and its own ``/metrics``;
``python -m fastlock metrics`` as the standalone exporter of the server gauges; a producer
enqueuing ``--jobs`` jobs of which every 50th fails on both its attempts (dead-lettered), each
handler holding one of three locks. Once the queue is drained, one scrape of each endpoint is
printed (the fastlock samples that are not zero, without the histogram buckets).

``python tools/fleet_scrape.py [--jobs 1000]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import threading
import time
import urllib.request
from multiprocessing.synchronize import Event

import fastlock
from fastlock.queues.jobs import Job
from fastlock.testing.servers import TempServer, free_port


def _queue(client: fastlock.Client) -> fastlock.Queue:
    return client.queue("emails", lease=5, max_attempts=2, backoff=0.01)


def _worker(url: str, port: int, ready: Event, stop: Event) -> None:
    import prometheus_client

    from fastlock.metrics import prometheus

    collector = prometheus.register()
    prometheus_client.start_http_server(port, addr="127.0.0.1")
    client = fastlock.Client(url)
    queue = _queue(client)
    collector.watch([queue], [])

    def handler(job: Job) -> None:
        number = int(job.payload)
        with client.lock(f"mailbox-{number % 3}", ttl=5, timeout=5):
            time.sleep(0.001)
        if number % 50 == 0:
            raise RuntimeError("poison")

    worker = fastlock.Worker(queue, handler, batch=10, idle_wait=0.2)

    def stopper() -> None:
        stop.wait()
        worker.stop()

    threading.Thread(target=stopper, daemon=True).start()
    ready.set()
    worker.run()
    stop.wait()


def _scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as reply:
        text: str = reply.read().decode()
    return [
        line
        for line in text.splitlines()
        if line.startswith("fastlock_") and not line.endswith(" 0.0") and "_bucket" not in line
        if "_created" not in line
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    jobs = parser.parse_args().jobs
    with TempServer() as server:
        stop = multiprocessing.Event()
        ports = [free_port() for _ in range(3)]
        readies = [multiprocessing.Event() for _ in range(2)]
        workers = [
            multiprocessing.Process(target=_worker, args=(server.url, port, ready, stop))
            for port, ready in zip(ports, readies, strict=False)
        ]
        exporter = subprocess.Popen(
            [
                *(sys.executable, "-m", "fastlock", "metrics", "--url", server.url, "--queue", "emails"),
                *("--addr", "127.0.0.1", "--port", str(ports[2]), "--every", "1"),
            ]
        )
        try:
            for process in workers:
                process.start()
            for ready in readies:
                ready.wait(30)
            queue = _queue(fastlock.Client(server.url))
            for number in range(1, jobs + 1):
                queue.enqueue(str(number))
            while (stats := queue.stats()).ready or stats.active or stats.delayed:
                time.sleep(0.1)
            time.sleep(1.5)  # the exporter's next reading
            for port, who in zip(ports, ("worker 1", "worker 2", "python -m fastlock metrics"), strict=True):
                lines = _scrape(port)
                print(f"--- {who}, :{port}/metrics: {len(lines)} fastlock samples that are not zero")
                print("\n".join(lines))
        finally:
            stop.set()
            for process in workers:
                process.join(10)
            exporter.terminate()
            exporter.wait()


if __name__ == "__main__":
    main()
