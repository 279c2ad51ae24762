"""fastlock.metrics.prometheus on real servers: the text format read back with
prometheus_client's own parser, bounded labels under 10,000 job ids, the cached server
gauges, a server restart, and the standalone exporter (``python -m fastlock metrics``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fastlock
from fastlock import metrics
from fastlock.metrics.prometheus import Collector, register
from fastlock.scripts.registry import flush_stats
from fastlock.testing.servers import TempServer, free_port

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(registry: CollectorRegistry) -> Samples:
    """Every sample of the registry's text exposition, parsed by prometheus_client."""
    text = generate_latest(registry).decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def registry() -> Iterator[tuple[CollectorRegistry, Collector]]:
    registry = CollectorRegistry()
    try:
        yield registry, register(registry)
    finally:
        metrics.uninstall()


Registered = tuple[CollectorRegistry, Collector]


def test_events_in_the_text_format(registry: Registered, client: fastlock.Client) -> None:
    reg, _ = registry
    lock = client.lock("prom", ttl=5.0)
    assert lock.acquire() is not None
    assert client.lock("prom", ttl=5.0, job_id="b").acquire(blocking=False) is None
    lock.release()
    queue = client.queue("prom-q", max_attempts=1)
    queue.enqueue_many([b"a", b"b", b"c"])
    first, second, third = queue.claim(3)
    queue.complete([first, second])
    assert queue.fail(third, "boom") is False
    samples = scrape(reg)
    assert value(samples, "fastlock_lock_acquires_total", lock_type="until_executed", result="acquired") == 1
    assert value(samples, "fastlock_lock_acquires_total", lock_type="until_executed", result="conflict") == 1
    assert value(samples, "fastlock_jobs_enqueued_total", queue="prom-q") == 3
    assert value(samples, "fastlock_jobs_claimed_total", queue="prom-q") == 3
    assert value(samples, "fastlock_jobs_completed_total", queue="prom-q") == 2
    assert value(samples, "fastlock_jobs_dead_lettered_total", queue="prom-q") == 1
    assert value(samples, "fastlock_job_wait_seconds_count", queue="prom-q") == 3  # three first claims
    # every call so far, folded at the scrape: the pending durations are not lost
    assert value(samples, "fastlock_script_call_duration_seconds_count", script="queue_claim") == 1
    assert value(samples, "fastlock_script_call_duration_seconds_count", script="lock_acquire") >= 2
    inf = value(samples, "fastlock_script_call_duration_seconds_bucket", script="queue_claim", le="+Inf")
    assert inf == 1


def test_labels_stay_bounded_under_10000_job_ids(registry: Registered, client: fastlock.Client) -> None:
    reg, _ = registry
    queue = client.queue("prom-many")
    ids = queue.enqueue_many(b"%d" % i for i in range(10_000))
    done = 0
    while batch := queue.claim(100):
        queue.complete(batch)
        done += len(batch)
    for job_id in ids[:300]:  # explicit job ids on a lock too
        assert client.lock("prom-many-lock", ttl=5.0, job_id=job_id, limit=1000).acquire() is not None
    samples = scrape(reg)
    assert done == 10_000 and value(samples, "fastlock_jobs_completed_total", queue="prom-many") == 10_000
    label_values = {v for (_, labels) in samples for _, v in labels}
    assert not label_values & set(ids)
    assert len(samples) < 200, len(samples)


def test_server_gauges_are_cached_and_survive_a_restart(private_server: TempServer) -> None:
    now = [0.0]
    reg, collector = CollectorRegistry(), Collector(clock=lambda: now[0])
    reg.register(collector)
    flush_stats()
    metrics.install(collector)
    try:
        with fastlock.Client(private_server.url) as client:
            queue = client.queue("gauged")
            lock = client.lock("gauged-lock", ttl=30.0, limit=3)
            collector.watch([queue], [lock], every=10.0)
            queue.enqueue_many([b"a", b"b"])
            queue.enqueue(b"later", delay=60)
            lock.acquire()
            samples = scrape(reg)
            assert value(samples, "fastlock_queue_jobs", queue="gauged", state="ready") == 2
            assert value(samples, "fastlock_queue_jobs", queue="gauged", state="delayed") == 1
            assert value(samples, "fastlock_lock_holders", lock="gauged-lock") == 1
            assert value(samples, "fastlock_server_up", watch="default") == 1
            queue.claim(1)
            assert value(scrape(reg), "fastlock_queue_jobs", queue="gauged", state="ready") == 2  # cached
            now[0] = 10.0
            samples = scrape(reg)
            assert value(samples, "fastlock_queue_jobs", queue="gauged", state="ready") == 1
            assert value(samples, "fastlock_queue_jobs", queue="gauged", state="active") == 1
            assert value(samples, "fastlock_queue_claims_total", queue="gauged") == 1  # the server's count
            assert 0 <= value(samples, "fastlock_queue_oldest_ready_seconds", queue="gauged") < 60

            reloads = value(samples, "fastlock_script_reloads_total", script="queue_enqueue")
            private_server.kill()
            now[0] = 20.0
            samples = scrape(reg)
            assert value(samples, "fastlock_server_up", watch="default") == 0
            assert (
                "fastlock_queue_jobs",
                frozenset({("queue", "gauged"), ("state", "ready")}),
            ) not in samples
            private_server.restart()  # an empty server: its scripts are gone too
            now[0] = 30.0
            queue.enqueue(b"after")
            samples = scrape(reg)
            assert value(samples, "fastlock_server_up", watch="default") == 1
            assert value(samples, "fastlock_queue_jobs", queue="gauged", state="ready") == 1
            assert value(samples, "fastlock_jobs_enqueued_total", queue="gauged") == 4  # counted across it
            assert value(samples, "fastlock_script_reloads_total", script="queue_enqueue") == reloads + 1
    finally:
        metrics.uninstall()


def test_the_standalone_exporter(server: TempServer, redis_url: str) -> None:
    with fastlock.Client(redis_url) as client:
        client.queue("exported").enqueue_many([b"a", b"b", b"c"])
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = ["--url", redis_url, "--port", str(port), "--addr", "127.0.0.1", "--queue", "exported"]
    with subprocess.Popen(
        [sys.executable, "-m", "fastlock", "metrics", *args, "--lock", "exported-lock"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as exporter:
        try:
            assert exporter.stdout is not None
            line = exporter.stdout.readline()
            assert f"127.0.0.1:{port}" in line, (line, exporter.stderr and exporter.stderr.read())
            deadline = time.monotonic() + 10
            while True:
                try:
                    text = (
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                    )
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            samples = {
                (s.name, frozenset(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            assert value(samples, "fastlock_queue_jobs", queue="exported", state="ready") == 3
            assert value(samples, "fastlock_lock_holders", lock="exported-lock") == 0
            assert value(samples, "fastlock_server_up", watch="default") == 1
        finally:
            exporter.send_signal(signal.SIGTERM)
            assert exporter.wait(15) == 0
