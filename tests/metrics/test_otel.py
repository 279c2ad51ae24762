"""fastlock.metrics.otel with the OpenTelemetry SDK's in-memory exporter and reader: span names,
kinds, attributes, parentage and the link from a job's process span to its enqueue span, in
one process and across a producer process and a Worker process (sync and asyncio both ways);
the metrics through the OTel metrics API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import fastlock
from fastlock import metrics
from fastlock.metrics import otel

TRACED = Path(__file__).with_name("traced.py")


class Setup:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.observer = otel.instrument(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def setup() -> Iterator[Setup]:
    made = Setup()
    try:
        yield made
    finally:
        metrics.uninstall()
        made.meter_provider.shutdown()


def test_spans_and_metrics_in_one_process(setup: Setup, redis_url: str, impl: str) -> None:
    tracer = setup.tracer_provider.get_tracer("test")
    with fastlock.Client(redis_url, impl=impl) as client:
        client.lock("otel-lock", ttl=5.0).acquire()  # no current span: no script-call span
        queue = client.queue("otel-q")
        with tracer.start_as_current_span("request"):
            job_id = queue.enqueue(b"x")
            assert client.lock("otel-lock", ttl=5.0, job_id="b").acquire(timeout=0.05) is None

        def handler(job: fastlock.Job) -> None:
            client.lock("otel-inner", ttl=5.0, job_id=job.id).acquire()

        assert fastlock.Worker(queue, handler, burst=True, idle_wait=0.0).run(max_jobs=1) == 1
    spans = {span.name: span for span in setup.spans.get_finished_spans()}
    request, send, process = spans["request"], spans["send otel-q"], spans["process otel-q"]
    assert send.kind is SpanKind.PRODUCER and send.parent is not None
    assert send.parent.span_id == request.context.span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "fastlock",
        "messaging.destination.name": "otel-q",
        "messaging.operation.type": "send",
    }
    enqueue_call = spans["EVALSHA queue_enqueue"]
    assert enqueue_call.kind is SpanKind.CLIENT and enqueue_call.parent is not None
    assert enqueue_call.parent.span_id == send.context.span_id
    assert dict(enqueue_call.attributes or {}) == {
        "db.system.name": "redis",
        "db.operation.name": "EVALSHA",
        "db.stored_procedure.name": "queue_enqueue",
    }
    assert "@00-" in job_id and job_id.startswith("~")  # the traceparent inside the fresh id
    assert process.kind is SpanKind.CONSUMER
    assert [(link.context.trace_id, link.context.span_id) for link in process.links] == [
        (send.context.trace_id, send.context.span_id)
    ]
    assert (process.attributes or {})["messaging.message.id"] == job_id
    parents = [
        s.parent.span_id
        for s in setup.spans.get_finished_spans()
        if s.parent and s.name == "EVALSHA lock_acquire"
    ]
    assert parents.count(process.context.span_id) == 1  # the handler's acquire, inside the process span
    assert parents.count(request.context.span_id) >= 1  # the waiting acquire's calls, inside the request
    wait = spans["lock wait until_executed"]
    assert (wait.attributes or {})["fastlock.lock.result"] == "timeout" and wait.parent is not None
    assert wait.end_time is not None and wait.start_time is not None
    assert wait.end_time - wait.start_time >= 40_000_000  # it waited ~50 ms

    sent = setup.points("messaging.client.sent.messages")
    assert [(p.attributes["messaging.destination.name"], p.value) for p in sent] == [("otel-q", 1)]
    calls = {
        p.attributes["db.stored_procedure.name"]: p.count
        for p in setup.points("db.client.operation.duration")
    }
    assert calls["queue_enqueue"] == 1 and calls["lock_acquire"] >= 3
    outcomes = {p.attributes["fastlock.job.outcome"]: p.value for p in setup.points("fastlock.jobs")}
    assert outcomes == {"completed": 1}
    acquires = {p.attributes["fastlock.lock.result"]: p.value for p in setup.points("fastlock.lock.acquires")}
    assert acquires == {"acquired": 2, "timeout": 1}
    assert [p.count for p in setup.points("messaging.process.duration")] == [1]


def test_server_gauges_through_otel(setup: Setup, redis_url: str) -> None:
    with fastlock.Client(redis_url) as client:
        queue = client.queue("otel-gauged")
        queue.enqueue_many([b"a", b"b"])
        setup.observer.watch([queue], [client.lock("otel-gauged-lock", ttl=None)], every=0.0)
        jobs = {p.attributes["fastlock.job.state"]: p.value for p in setup.points("fastlock.queue.jobs")}
        assert jobs == {"ready": 2, "delayed": 0, "active": 0, "dead": 0}
        assert [p.value for p in setup.points("fastlock.queue.claims")] == [0]
        holders = setup.points("fastlock.lock.holders")
        assert [(p.attributes["fastlock.lock.name"], p.value) for p in holders] == [("otel-gauged-lock", 0)]


def _spans(role: str, url: str, queue: str, transport: str) -> list[dict[str, Any]]:
    run = subprocess.run(
        [sys.executable, str(TRACED), role, url, queue, transport], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()]


@pytest.mark.slow  # worker processes
@pytest.mark.parametrize(
    ("producer", "consumer"), [("sync", "sync"), ("asyncio", "sync"), ("sync", "asyncio")]
)
def test_a_job_links_across_processes(redis_url: str, producer: str, consumer: str) -> None:
    """A producer process enqueues inside its request span; a Worker process processes each
    job in a span linked to that job's enqueue span, its own script calls inside it."""
    queue = f"otel-x-{producer}-{consumer}"
    produced = _spans("produce", redis_url, queue, producer)
    request = next(s for s in produced if s["name"] == "app request")
    sends = [s for s in produced if s["name"] == f"send {queue}"]
    assert len(sends) == 2 and all(s["parent"] == request["span_id"] for s in sends)
    assert all(s["kind"] == "PRODUCER" and s["trace_id"] == request["trace_id"] for s in sends)
    worked = _spans("work", redis_url, queue, consumer)
    processes = [s for s in worked if s["name"] == f"process {queue}"]
    assert len(processes) == 3
    links = sorted(tuple(link) for s in processes for link in s["links"])
    single, batch = ((s["trace_id"], s["span_id"]) for s in sends)  # enqueue's, then enqueue_many's
    assert links == sorted([single, batch, batch])  # one link per job
    for process in processes:
        assert process["kind"] == "CONSUMER" and process["trace_id"] != request["trace_id"]  # a new trace
        assert process["attributes"]["messaging.destination.name"] == queue
        inner = [s for s in worked if s["parent"] == process["span_id"]]
        assert [s["name"] for s in inner] == ["EVALSHA lock_acquire"]


def test_prometheus_and_otel_side_by_side(redis_url: str) -> None:
    """install(collector, tracer): a Fanout; each gets every event, the traces still link."""
    from prometheus_client import CollectorRegistry, generate_latest

    from fastlock.metrics import prometheus

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    registry = CollectorRegistry()
    collector = prometheus.register(registry, install=False)
    tracer = otel.instrument(tracer_provider=provider, install=False)
    metrics.install(collector, tracer)
    try:
        installed = metrics.installed()
        assert isinstance(installed, metrics.Fanout) and installed.per_call
        with fastlock.Client(redis_url) as client:
            queue = client.queue("otel-both")
            job_id = queue.enqueue(b"x")
            assert fastlock.Worker(queue, lambda job: None, burst=True, idle_wait=0.0).run(max_jobs=1) == 1
        text = generate_latest(registry).decode()
        assert 'fastlock_jobs_completed_total{queue="otel-both"} 1.0' in text
        names = {span.name: span for span in spans.get_finished_spans()}
        send, process = names["send otel-both"], names["process otel-both"]
        assert "@00-" in job_id and [link.context.span_id for link in process.links] == [send.context.span_id]
    finally:
        metrics.uninstall()
    with pytest.raises(fastlock.ArgumentTypeError):
        metrics.install()
