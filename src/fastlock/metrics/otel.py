"""fastlock's metrics and traces through the OpenTelemetry API (extra ``fastlock[otel]``:
``opentelemetry-api``; the application installs and configures the SDK and its exporters).

One line turns them on: ``fastlock.metrics.otel.instrument()`` installs an :class:`OtelObserver`
taking its tracer and meter from the global providers (or the ones given). It follows the
database and messaging semantic conventions (v1.26+, marked "development" upstream):

- a ``CLIENT`` span per script call, ``EVALSHA <script>`` (``db.system.name``,
  ``db.operation.name``, ``db.stored_procedure.name``; ``error.type`` when it raised), made only
  inside a span that records (an enqueue, a job's processing, the application's own): a call
  outside any trace costs no span. It is written when the call has returned (its start and end
  as measured), so it has no children;
- a ``PRODUCER`` span per enqueue, ``send <queue>``, whose W3C ``traceparent`` travels inside
  each fresh job id (after ``@``; a job id given by the caller carries none);
- a ``CONSUMER`` span per job a worker processes, ``process <queue>``, a child of whatever is
  current in the worker and *linked* to the enqueue's span (across processes, sync or asyncio);
- an ``INTERNAL`` span ``lock wait <lock type>`` per acquire that waited (its result in
  ``fastlock.lock.result``); an acquire that does not wait is its script call's span.

Metrics: ``db.client.operation.duration``, ``messaging.client.sent.messages``,
``messaging.client.consumed.messages``, ``messaging.process.duration`` and ``fastlock.*``
counters (docs/observability.md lists them).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import __version__
from ..queues.ids import CARRY_MARK, FRESH_MARK
from ..scripts.registry import flush_stats
from . import Observer
from . import install as install_observer
from .gauges import STATES, Watched

__all__ = ["OtelObserver", "carried_context", "instrument"]

_PROPAGATOR = TraceContextTextMapPropagator()


def _context_reader() -> tuple[Callable[[], Mapping[str, Any]], str]:
    """How to read the current context's span in one C call per step: the API's contextvar and
    key (every API release since 1.0 has them), else the public function."""
    public = (lambda: {"span": trace.get_current_span()}), "span"
    try:
        from opentelemetry.trace.propagation import _SPAN_KEY as key
    except ImportError:  # pragma: no cover - not in any release so far
        return public
    var = getattr(getattr(otel_context, "_RUNTIME_CONTEXT", None), "_current_context", None)
    return (var.get, key) if isinstance(var, contextvars.ContextVar) else public


_current_context, _SPAN_KEY = _context_reader()
_MESSAGING = "fastlock"  # messaging.system


def carried_context(job_id: str) -> trace.SpanContext | None:
    """The span context a fresh job id carries (its enqueue span), or ``None``."""
    if not job_id.startswith(FRESH_MARK):
        return None
    _, mark, carried = job_id.partition(CARRY_MARK)
    if not mark:
        return None
    context = trace.get_current_span(_PROPAGATOR.extract({"traceparent": carried})).get_span_context()
    return context if context.is_valid else None


class OtelObserver(Observer):
    """The events as OpenTelemetry metrics (``meter_provider``, default the global one) and
    spans (``tracer_provider``; ``traces=False``: metrics only). ``db_system`` is
    ``db.system.name`` (``"valkey"`` for Valkey servers)."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: otel_metrics.MeterProvider | None = None,
        traces: bool = True,
        db_system: str = "redis",
    ) -> None:
        self.per_call = traces
        self._tracer = trace.get_tracer("fastlock", __version__, tracer_provider) if traces else None
        meter = otel_metrics.get_meter("fastlock", __version__, meter_provider)
        self._no_meter = isinstance(meter, otel_metrics.NoOpMeter)  # no loop over the calls for nothing
        self._db = {"db.system.name": db_system, "db.operation.name": "EVALSHA"}
        self._attributes: dict[tuple[str, ...], dict[str, str]] = {}
        self._call_duration = meter.create_histogram(
            "db.client.operation.duration", unit="s", description="Script calls (EVALSHA), client side"
        )
        self._sent = meter.create_counter("messaging.client.sent.messages", description="Jobs enqueued")
        self._consumed = meter.create_counter(
            "messaging.client.consumed.messages", description="Jobs claimed"
        )
        self._process = meter.create_histogram(
            "messaging.process.duration", unit="s", description="Handler runs"
        )
        self._jobs = meter.create_counter("fastlock.jobs", description="Job outcomes (fastlock.job.outcome)")
        self._acquires = meter.create_counter("fastlock.lock.acquires", description="Acquires by result")
        self._lock_wait = meter.create_histogram("fastlock.lock.wait.duration", unit="s", description="Waits")
        self._job_wait = meter.create_histogram(
            "fastlock.job.wait.duration",
            unit="s",
            description="Time a job waited from due to its first claim",
        )
        self._lost = meter.create_counter("fastlock.lock.lost", description="Jobs done without their lock")
        self._handovers = meter.create_counter(
            "fastlock.lock.handovers", description="Locks a release handed over to a waiter"
        )
        self._reconnects = meter.create_counter(
            "fastlock.client.reconnects", description="Connections opened in place of lost ones"
        )
        self._reloads = meter.create_counter("fastlock.script.reloads", description="NOSCRIPT reloads")
        self._busy = meter.create_counter("fastlock.script.busy_waits", description="Sleeps on BUSY")
        self._redirects = meter.create_counter("fastlock.cluster.redirects", description="Redirects followed")
        self._watched: list[Watched] = []
        meter.create_observable_gauge(
            "fastlock.queue.jobs", [self._observe_jobs], description="Jobs by state"
        )
        meter.create_observable_gauge("fastlock.lock.holders", [self._observe_holders], description="Holders")
        meter.create_observable_counter(
            "fastlock.queue.claims", [self._observe_claims], description="Leases a queue granted"
        )
        meter.create_observable_gauge(
            "fastlock.queue.oldest_ready", [self._observe_oldest], unit="s", description="Age of the next job"
        )

    def _labels(self, *key: str) -> dict[str, str]:
        """The attributes of a script (``key`` = its name) or queue event, made once."""
        found = self._attributes.get(key)
        if found is None:
            if key[0] == "script":
                found = {**self._db, "db.stored_procedure.name": key[1]}
            else:
                found = {"messaging.system": _MESSAGING, "messaging.destination.name": key[1]}
            found = self._attributes[key] = found
        return found

    # ---- scripts

    def script_calls(self, name: str, durations: Sequence[float]) -> None:
        if self._no_meter:
            return
        record, attributes = self._call_duration.record, self._labels("script", name)
        for seconds in durations:
            record(seconds, attributes)

    def call_gate(self) -> tuple[Callable[[], Mapping[str, Any]], str] | None:
        return (_current_context, _SPAN_KEY) if _SPAN_KEY != "span" else None

    def script_call(self, name: str, seconds: float) -> None:
        span = _current_context().get(_SPAN_KEY)  # trace.get_current_span(), without its frames
        if span is not None and span.is_recording():
            self._span(f"EVALSHA {name}", SpanKind.CLIENT, seconds, self._labels("script", name))

    def script_failed(self, name: str, seconds: float, error: str) -> None:
        attributes = {**self._labels("script", name), "error.type": error}
        self._call_duration.record(seconds, attributes)
        if self._tracer is not None and trace.get_current_span().is_recording():
            self._span(f"EVALSHA {name}", SpanKind.CLIENT, seconds, attributes, error)

    def script_reloaded(self, name: str) -> None:
        self._reloads.add(1, self._labels("script", name))

    def busy_waited(self, name: str, seconds: float) -> None:
        self._busy.add(1, self._labels("script", name))

    def redirected(self, kind: str) -> None:
        self._redirects.add(1, {"fastlock.redirect": kind})

    def _span(
        self, name: str, kind: SpanKind, seconds: float, attributes: dict[str, Any], error: str | None = None
    ) -> None:
        """A span that ended now and lasted ``seconds``."""
        assert self._tracer is not None
        end = time.time_ns()
        span = self._tracer.start_span(
            name, kind=kind, attributes=attributes, start_time=end - int(seconds * 1e9)
        )
        if error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        span.end(end_time=end)

    # ---- locks

    def _acquire(self, lock_type: str, result: str, waited: float | None) -> None:
        attributes = {"fastlock.lock.type": lock_type, "fastlock.lock.result": result}
        self._acquires.add(1, attributes)
        if waited is not None:
            self._lock_wait.record(waited, attributes)
            if self._tracer is not None:
                self._span(f"lock wait {lock_type}", SpanKind.INTERNAL, waited, attributes)

    def lock_acquired(self, lock_type: str, waited: float) -> None:
        self._acquire(lock_type, "acquired", waited or None)

    def lock_conflict(self, lock_type: str) -> None:
        self._acquire(lock_type, "conflict", None)

    def lock_timed_out(self, lock_type: str, waited: float) -> None:
        self._acquire(lock_type, "timeout", waited)

    def lock_handed_over(self, lock_type: str) -> None:
        self._handovers.add(1, {"fastlock.lock.type": lock_type})

    def lock_lost(self, lock_type: str) -> None:
        self._lost.add(1, {"fastlock.lock.type": lock_type})

    def reconnected(self) -> None:
        self._reconnects.add(1)

    # ---- jobs

    def _outcome(self, queue: str, outcome: str, count: int = 1) -> None:
        if count:
            self._jobs.add(count, {**self._labels("queue", queue), "fastlock.job.outcome": outcome})

    def jobs_enqueued(self, queue: str, count: int) -> None:
        self._sent.add(count, self._labels("queue", queue))

    def jobs_claimed(self, queue: str, count: int) -> None:
        self._consumed.add(count, self._labels("queue", queue))

    def jobs_waited(self, queue: str, waits: Sequence[float]) -> None:
        record, attributes = self._job_wait.record, self._labels("queue", queue)
        for seconds in waits:
            record(seconds, attributes)

    def jobs_completed(self, queue: str, count: int) -> None:
        self._outcome(queue, "completed", count)

    def job_failed(self, queue: str, retried: bool) -> None:
        self._outcome(queue, "retried" if retried else "dead_lettered")

    def jobs_recovered(self, queue: str, requeued: int, dead: int) -> None:
        self._outcome(queue, "recovered", requeued)
        self._outcome(queue, "dead_lettered", dead)

    def job_ran(self, queue: str, seconds: float, error: str | None) -> None:
        attributes = self._labels("queue", queue)
        if error is not None:
            attributes = {**attributes, "error.type": error}
            if error == "JobTimeout":
                self._outcome(queue, "timed_out")
        self._process.record(seconds, attributes)

    @contextmanager
    def producing(self, queue: str) -> Iterator[str | None]:
        if self._tracer is None:
            yield None
            return
        attributes = {**self._labels("queue", queue), "messaging.operation.type": "send"}
        with self._tracer.start_as_current_span(
            f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes
        ):
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier)
            yield carrier.get("traceparent")

    @contextmanager
    def processing(self, queue: str, job: Any) -> Iterator[None]:
        if self._tracer is None:
            yield
            return
        attributes = {
            **self._labels("queue", queue),
            "messaging.operation.type": "process",
            "messaging.message.id": job.id,
            "fastlock.job.attempt": job.attempt,
        }
        sent = carried_context(job.id)
        links = [Link(sent)] if sent is not None else []
        with self._tracer.start_as_current_span(
            f"process {queue}", kind=SpanKind.CONSUMER, attributes=attributes, links=links
        ):
            yield

    # ---- the server side

    def watch(
        self,
        queues: Iterable[Any] = (),
        locks: Iterable[Any] = (),
        *,
        every: float = 10.0,
        name: str = "default",
    ) -> None:
        """Also report ``fastlock.queue.jobs`` (by ``fastlock.job.state``) and
        ``fastlock.lock.holders`` for these queues and locks of one sync client, read when
        the meter collects, at most once per ``every`` seconds."""
        self._watched.append(Watched(name, list(queues), list(locks), every, time.monotonic))

    def _observe_jobs(self, options: Any) -> Iterator[otel_metrics.Observation]:
        # A reader's collection runs the callbacks before it reads the instruments: the
        # scripts' pending durations are folded into db.client.operation.duration here first.
        flush_stats()
        for watched in self._watched:
            for queue, counts in watched.now().jobs.items():
                for state in STATES:
                    attributes = {**self._labels("queue", queue), "fastlock.job.state": state}
                    yield otel_metrics.Observation(counts[state], attributes)

    def _observe_claims(self, options: Any) -> Iterator[otel_metrics.Observation]:
        for watched in self._watched:
            for queue, count in watched.now().claims.items():
                yield otel_metrics.Observation(count, self._labels("queue", queue))

    def _observe_oldest(self, options: Any) -> Iterator[otel_metrics.Observation]:
        for watched in self._watched:
            for queue, age in watched.now().oldest.items():
                yield otel_metrics.Observation(age, self._labels("queue", queue))

    def _observe_holders(self, options: Any) -> Iterator[otel_metrics.Observation]:
        for watched in self._watched:
            for lock, count in watched.now().holders.items():
                yield otel_metrics.Observation(count, {"fastlock.lock.name": lock})


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: otel_metrics.MeterProvider | None = None,
    traces: bool = True,
    db_system: str = "redis",
    install: bool = True,
) -> OtelObserver:
    """Make an :class:`OtelObserver` and (``install``) install it as the process's observer;
    returns it. Install it before making clients: only the clients made afterwards trace
    script calls. Beside Prometheus: ``fastlock.metrics.install(collector, observer)``."""
    observer = OtelObserver(
        tracer_provider=tracer_provider, meter_provider=meter_provider, traces=traces, db_system=db_system
    )
    if install:
        flush_stats()  # the calls made before go to the observer before (or nowhere)
        install_observer(observer)
    return observer
