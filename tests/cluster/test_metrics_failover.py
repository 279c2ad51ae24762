"""Metrics through a failover (issue 24): a Prometheus collector watching a queue of a
SentinelClient keeps reading it after ``SENTINEL FAILOVER`` (the gauges are the new master's,
``fastlock_server_up`` stays 1) and the process's counters go on counting across it."""

from __future__ import annotations

import pytest
from metrics.test_prometheus import scrape, value
from prometheus_client import CollectorRegistry

from fastlock import metrics
from fastlock.cluster import SentinelClient
from fastlock.metrics.prometheus import Collector
from fastlock.scripts.registry import flush_stats
from fastlock.testing.cluster import wait_until
from fastlock.testing.sentinel import TempSentinels

pytestmark = [pytest.mark.slow, pytest.mark.fault]


def test_a_watched_queue_is_read_on_the_new_master(fresh_sentinels: TempSentinels) -> None:
    sentinels, now = fresh_sentinels, [0.0]
    registry, collector = CollectorRegistry(), Collector(clock=lambda: now[0])
    registry.register(collector)
    flush_stats()
    metrics.install(collector)
    try:
        with SentinelClient(sentinels.sentinels, sentinels.service) as client:
            queue = client.queue("watched")
            collector.watch([queue], every=10.0)
            queue.enqueue_many([b"a", b"b", b"c"])
            assert client.execute("WAIT", 1, 5000) == 1  # the replica that takes over has them
            samples = scrape(registry)
            assert value(samples, "fastlock_queue_jobs", queue="watched", state="ready") == 3
            old = client.master
            sentinels.failover()
            wait_until(lambda: client.master != old, 60, "the client followed the failover")
            queue.enqueue(b"d")  # on the new master
            now[0] = 10.0
            samples = scrape(registry)
            assert value(samples, "fastlock_server_up", watch="default") == 1
            assert value(samples, "fastlock_queue_jobs", queue="watched", state="ready") == 4
            assert value(samples, "fastlock_jobs_enqueued_total", queue="watched") == 4  # across it
            (job,) = queue.claim()
            queue.complete(job)
            now[0] = 20.0
            samples = scrape(registry)
            assert value(samples, "fastlock_queue_claims_total", queue="watched") == 1
            assert value(samples, "fastlock_jobs_completed_total", queue="watched") == 1
    finally:
        metrics.uninstall()
