"""A producer or a worker process with OpenTelemetry tracing on (the SDK's in-memory exporter),
for tests/metrics/test_otel.py: ``python traced.py produce|work URL QUEUE sync|asyncio``
prints its finished spans as JSON lines (name, kind, ids, parent, links, attributes)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import fastlock
from fastlock.aio import AsyncWorker
from fastlock.aio import Client as AsyncClient
from fastlock.metrics import otel

JOBS = 3


def as_dict(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": context.trace_id,
        "span_id": context.span_id,
        "parent": span.parent.span_id if span.parent else None,
        "links": [[link.context.trace_id, link.context.span_id] for link in span.links],
        "attributes": dict(span.attributes or {}),
    }


def main(role: str, url: str, queue_name: str, transport: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(tracer_provider=provider)
    tracer = provider.get_tracer("test")
    hooks: list[str] = []

    def handler(job: fastlock.Job) -> None:
        with fastlock.Client(url) as inner:  # a script call inside the process span
            inner.lock(f"traced-{job.payload.decode()}", ttl=5.0).acquire()

    async def async_handler(job: fastlock.Job) -> None:
        async with AsyncClient(url) as inner:
            await inner.lock(f"traced-{job.payload.decode()}", ttl=5.0).acquire()

    def after(job: fastlock.Job) -> None:
        hooks.append(job.id)

    if role == "produce" and transport == "sync":
        with fastlock.Client(url) as client, tracer.start_as_current_span("app request"):
            queue = client.queue(queue_name)
            queue.enqueue(b"one")
            queue.enqueue_many([b"two", b"three"])
    elif role == "produce":

        async def produce() -> None:
            async with AsyncClient(url) as client:
                with tracer.start_as_current_span("app request"):
                    queue = client.queue(queue_name)
                    await queue.enqueue(b"one")
                    await queue.enqueue_many([b"two", b"three"])

        asyncio.run(produce())
    elif transport == "sync":
        with fastlock.Client(url) as client:
            worker = fastlock.Worker(
                client.queue(queue_name), handler, burst=True, idle_wait=0.0, after=after
            )
            assert worker.run(max_jobs=JOBS) == JOBS
    else:

        async def work() -> None:
            async with AsyncClient(url) as client:
                queue = client.queue(queue_name)
                worker = AsyncWorker(queue, async_handler, burst=True, idle_wait=0.0, after=after)
                assert await worker.run(max_jobs=JOBS) == JOBS

        asyncio.run(work())
    if role == "work":
        assert len(hooks) == JOBS, hooks  # the after hook still runs for every job
    for span in exporter.get_finished_spans():
        print(json.dumps(as_dict(span)))


if __name__ == "__main__":
    main(*sys.argv[1:])
