"""fastlock's metrics for Prometheus (extra ``fastlock[prometheus]``: ``prometheus_client``).

One line turns them on: ``fastlock.metrics.prometheus.register()`` installs a
:class:`Collector` as the process's observer and registers it with ``prometheus_client``'s
default registry (or the one given); ``start_http_server`` or any exposition serves it.
Client-side counters and histograms come from the events (:class:`~fastlock.metrics.Observer`);
server-side gauges from :meth:`Collector.watch` (queue depths, lock holders), read with the
bounded admin calls at most every ``every`` seconds and only when scraped, never on a hot path.
``python -m fastlock metrics --url ... --port 9108`` is the standalone exporter. The figures
are the process's (each forked worker process has its own: scrape each, or sum in PromQL).
Metric names and the ready queries: docs/observability.md.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    REGISTRY,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from ..scripts.registry import flush_stats
from . import Observer
from . import install as install_observer
from .gauges import STATES, Watched

__all__ = ["CALL_BUCKETS", "COUNTERS", "HISTOGRAMS", "WAIT_BUCKETS", "Collector", "register"]

CALL_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
"""Seconds: a script call's round trip is usually under a millisecond."""
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds: a lock wait, a handler's run."""

_FOLD_AT = 256  # events a counter keeps pending before they are added up

COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fastlock_script_errors": ("Script calls that raised, by exception class", ("script", "error")),
    "fastlock_script_reloads": ("NOSCRIPT reloads (restart, failover, SCRIPT FLUSH)", ("script",)),
    "fastlock_script_busy_waits": ("Sleeps while the server ran another script (BUSY)", ("script",)),
    "fastlock_script_busy_wait_seconds": ("Time slept on BUSY", ("script",)),
    "fastlock_cluster_redirects": ("Cluster redirects followed", ("kind",)),
    "fastlock_lock_acquires": ("Lock acquires by result", ("lock_type", "result")),
    "fastlock_lock_handovers": ("Locks a release handed over to a waiter", ("lock_type",)),
    "fastlock_lock_lost": ("Jobs that finished without holding their lock", ("lock_type",)),
    "fastlock_reconnects": ("Connections opened in place of lost ones", ()),
    "fastlock_jobs_enqueued": ("Jobs added", ("queue",)),
    "fastlock_jobs_claimed": ("Jobs leased", ("queue",)),
    "fastlock_jobs_completed": ("Jobs completed", ("queue",)),
    "fastlock_jobs_retried": ("Jobs failed, to be retried", ("queue",)),
    "fastlock_jobs_dead_lettered": ("Jobs sent to the dead letters", ("queue",)),
    "fastlock_jobs_recovered": ("Expired leases put back to ready", ("queue",)),
    "fastlock_jobs_timed_out": ("Handlers that ran past job_timeout", ("queue",)),
}
"""The counters: name (``_total`` added in the exposition) -> help and label names."""
HISTOGRAMS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "fastlock_script_call_duration_seconds": ("Script calls that succeeded", ("script",), CALL_BUCKETS),
    "fastlock_lock_wait_seconds": ("Time an acquire waited", ("lock_type", "result"), WAIT_BUCKETS),
    "fastlock_job_run_duration_seconds": ("Handler run time", ("queue", "outcome"), WAIT_BUCKETS),
    "fastlock_job_wait_seconds": ("Time a job waited from due to its first claim", ("queue",), WAIT_BUCKETS),
}
"""The histograms: name -> help, label names and bucket bounds."""


class Collector(Observer):
    """The events as Prometheus counters and histograms, and the watched server gauges.
    Thread-safe (one lock around each update: a dict entry and, for a histogram, a bisected
    bucket); register it with a ``prometheus_client`` registry (:func:`register` does that and
    installs it)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._watched: list[Watched] = []
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, tuple[str, ...]], float] = {}
        self._pending: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # counts not folded yet
        self._acquired: dict[str, list[float]] = {}  # lock type -> its pending list above
        self._histograms: dict[tuple[str, tuple[str, ...]], list[float]] = {}  # cumulative, +Inf, sum

    def _add(self, name: str, labels: tuple[str, ...], amount: float = 1) -> None:
        # No lock per event: list.append is atomic; the folds (under the lock) add them up.
        key = (name, labels)
        pending = self._pending.get(key) or self._pending.setdefault(key, [])
        pending.append(amount)
        if len(pending) >= _FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        with self._lock:
            for key, pending in list(self._pending.items()):
                n = len(pending)  # only this removes items: the first n stay put meanwhile
                if n:
                    self._counts[key] = self._counts.get(key, 0) + sum(pending[:n])
                    del pending[:n]

    def _observe(self, name: str, labels: tuple[str, ...], values: Sequence[float]) -> None:
        # Sorted once (in C), each bucket's cumulative count is one bisection: a batch of the
        # scripts' 256 durations costs no Python loop over them.
        ordered = sorted(values)
        bounds = HISTOGRAMS[name][2]
        counts = [bisect_right(ordered, bound) for bound in bounds]
        total, key = sum(ordered), (name, labels)
        with self._lock:
            found = self._histograms.get(key)
            if found is None:
                found = self._histograms[key] = [0.0] * (len(bounds) + 2)
            for i, count in enumerate(counts):
                found[i] += count
            found[-2] += len(ordered)
            found[-1] += total

    # ---- the events

    def script_calls(self, name: str, durations: Sequence[float]) -> None:
        self._observe("fastlock_script_call_duration_seconds", (name,), durations)

    def script_failed(self, name: str, seconds: float, error: str) -> None:
        self._add("fastlock_script_errors", (name, error))

    def script_reloaded(self, name: str) -> None:
        self._add("fastlock_script_reloads", (name,))

    def busy_waited(self, name: str, seconds: float) -> None:
        self._add("fastlock_script_busy_waits", (name,))
        self._add("fastlock_script_busy_wait_seconds", (name,), seconds)

    def redirected(self, kind: str) -> None:
        self._add("fastlock_cluster_redirects", (kind,))

    def lock_acquired(self, lock_type: str, waited: float) -> None:
        pending = self._acquired.get(lock_type)  # (the add inlined: an acquire's fast path)
        if pending is None:
            key = ("fastlock_lock_acquires", (lock_type, "acquired"))
            pending = self._acquired[lock_type] = self._pending.setdefault(key, [])
        pending.append(1)
        if len(pending) >= _FOLD_AT:
            self._fold()
        if waited:
            self._observe("fastlock_lock_wait_seconds", (lock_type, "acquired"), (waited,))

    def lock_conflict(self, lock_type: str) -> None:
        self._add("fastlock_lock_acquires", (lock_type, "conflict"))

    def lock_timed_out(self, lock_type: str, waited: float) -> None:
        self._add("fastlock_lock_acquires", (lock_type, "timeout"))
        self._observe("fastlock_lock_wait_seconds", (lock_type, "timeout"), (waited,))

    def lock_handed_over(self, lock_type: str) -> None:
        self._add("fastlock_lock_handovers", (lock_type,))

    def lock_lost(self, lock_type: str) -> None:
        self._add("fastlock_lock_lost", (lock_type,))

    def reconnected(self) -> None:
        self._add("fastlock_reconnects", ())

    def jobs_enqueued(self, queue: str, count: int) -> None:
        self._add("fastlock_jobs_enqueued", (queue,), count)

    def jobs_claimed(self, queue: str, count: int) -> None:
        self._add("fastlock_jobs_claimed", (queue,), count)

    def jobs_waited(self, queue: str, waits: Sequence[float]) -> None:
        self._observe("fastlock_job_wait_seconds", (queue,), waits)

    def jobs_completed(self, queue: str, count: int) -> None:
        self._add("fastlock_jobs_completed", (queue,), count)

    def job_failed(self, queue: str, retried: bool) -> None:
        self._add("fastlock_jobs_retried" if retried else "fastlock_jobs_dead_lettered", (queue,))

    def jobs_recovered(self, queue: str, requeued: int, dead: int) -> None:
        self._add("fastlock_jobs_recovered", (queue,), requeued)
        self._add("fastlock_jobs_dead_lettered", (queue,), dead)

    def job_ran(self, queue: str, seconds: float, error: str | None) -> None:
        if error == "JobTimeout":
            self._add("fastlock_jobs_timed_out", (queue,))
        self._observe(
            "fastlock_job_run_duration_seconds", (queue, "ok" if error is None else "error"), (seconds,)
        )

    # ---- the server side

    def watch(
        self,
        queues: Iterable[Any] = (),
        locks: Iterable[Any] = (),
        *,
        every: float = 10.0,
        name: str = "default",
    ) -> None:
        """Also expose gauges of these queues (``fastlock_queue_jobs{queue,state}``) and
        locks (``fastlock_lock_holders{lock}``) of one sync client, read when scraped, at
        most once per ``every`` seconds (the last reading served in between);
        ``fastlock_server_up{watch=name}`` says whether the last reading succeeded."""
        self._watched.append(Watched(name, list(queues), list(locks), every, self._clock))

    # ---- prometheus_client's Collector protocol

    def collect(self) -> Iterator[Metric]:
        """Every figure now (the scripts' pending durations folded first)."""
        flush_stats()
        self._fold()
        with self._lock:
            counts, histograms = dict(self._counts), {key: list(h) for key, h in self._histograms.items()}
        for name, (doc, labels) in COUNTERS.items():
            counter = CounterMetricFamily(name, doc, labels=labels)
            for (of, values), value in counts.items():
                if of == name:
                    counter.add_metric(values, value)
            yield counter
        for name, (doc, labels, bounds) in HISTOGRAMS.items():
            histogram = HistogramMetricFamily(name, doc, labels=labels)
            for (of, values), found in histograms.items():
                if of == name:
                    buckets = list(zip([*map(str, bounds), "+Inf"], found[:-1], strict=True))
                    histogram.add_metric(values, buckets, found[-1])
            yield histogram
        jobs = GaugeMetricFamily("fastlock_queue_jobs", "Jobs in a queue by state", labels=["queue", "state"])
        holders = GaugeMetricFamily("fastlock_lock_holders", "Holders of a lock's scope", labels=["lock"])
        claims = CounterMetricFamily(
            "fastlock_queue_claims", "Leases a queue granted (the server's count)", labels=["queue"]
        )
        oldest = GaugeMetricFamily(
            "fastlock_queue_oldest_ready_seconds", "Age of the job a claim takes next", labels=["queue"]
        )
        up = GaugeMetricFamily(
            "fastlock_server_up", "1 when the last read of the server succeeded", labels=["watch"]
        )
        for watched in self._watched:
            reading = watched.now()
            up.add_metric([watched.name], 1 if reading.up else 0)
            for queue, by_state in reading.jobs.items():
                for state in STATES:
                    jobs.add_metric([queue, state], by_state[state])
                claims.add_metric([queue], reading.claims[queue])
            for queue, age in reading.oldest.items():
                oldest.add_metric([queue], age)
            for lock, count in reading.holders.items():
                holders.add_metric([lock], count)
        if self._watched:
            yield from (jobs, claims, oldest, holders, up)


def register(registry: CollectorRegistry = REGISTRY, *, install: bool = True) -> Collector:
    """Make a :class:`Collector`, register it with ``registry`` and (``install``) install it as
    the process's observer; returns it (for :meth:`Collector.watch`, or to install it beside
    another: ``fastlock.metrics.install(collector, otel_observer)``)."""
    collector = Collector()
    registry.register(collector)
    if install:
        flush_stats()  # the calls made before go to the observer before (or nowhere)
        install_observer(collector)
    return collector
