"""Worker processes of tests/cluster/test_chaos_processes.py (a module of their own, so that the
"spawn" start method imports them without the test module's fixtures).

Every worker builds its own client from a :class:`Target` (a :class:`ClusterClient` from the
seed URL, or a :class:`SentinelClient` from the sentinels), runs until ``stop`` is set
and puts one :class:`Report` on ``out``: its events, its error counts by type, and a traceback if
it died. Events are stamped by a **logical clock** shared by the processes (``tick``: a counter
incremented under a lock), not by a wall clock: ``a.end < b.start`` means ``a`` returned before
``b`` was sent, whatever the machine's load.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import fastlock
from fastlock.cluster import ClusterClient, SentinelClient

NEVER = 2**62
"""The start tick of a phase that has not started."""


def tick(clock: Any) -> int:
    """The next value of the shared logical clock."""
    with clock.get_lock():
        clock.value += 1
        return int(clock.value)


def phase_of(phases: Any, at: int) -> int:
    """The phase (0, 1, 2) in which the tick ``at`` falls (``phases``: the start ticks)."""
    return max(i for i in range(len(phases)) if phases[i] <= at)


@dataclass(frozen=True)
class Target:
    """Where the workers connect: a cluster's seed ``url``, or ``sentinels`` and ``service``."""

    url: str = ""
    sentinels: tuple[str, ...] = ()
    service: str = ""

    def connect(self, wait: tuple[int, int] | None) -> ClusterClient | SentinelClient:
        if self.sentinels:
            return SentinelClient(self.sentinels, self.service, wait=wait)
        return ClusterClient(self.url, wait=wait)


@dataclass
class Shared:
    """What the parent shares with its workers: the clock, the phases' start ticks, progress
    per phase (confirmed lock cycles, accepted completions) and the stop flag."""

    clock: Any
    phases: Any
    progress: Any
    stop: Any

    def made_progress(self, start: int, kind: int = 0) -> None:
        """Count one success of ``kind`` (0: a lock cycle or completion; 1: a stale completion
        refused) in the phase of its ``start``."""
        i = phase_of(self.phases, start) + kind * len(self.phases)
        with self.progress.get_lock():
            self.progress[i] += 1


@dataclass
class Report:
    """One worker's result."""

    me: str
    events: list[tuple[Any, ...]] = field(default_factory=list)
    claims: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    samples: dict[str, str] = field(default_factory=dict)
    failure: str | None = None


def _count(report: Report, exc: BaseException, shared: Shared, what: str) -> None:
    key = f"{what} {type(exc).__name__} phase {phase_of(shared.phases, tick(shared.clock))}"
    report.errors[key] += 1
    report.samples.setdefault(key, repr(exc)[:300])


def _run(report: Report, out: Any, body: Any) -> None:
    try:
        body()
    except BaseException:  # noqa: BLE001 - every failure goes to the parent, which fails the test
        report.failure = traceback.format_exc()
    out.put(report)


def lock_worker(
    target: Target,
    wait: tuple[int, int] | None,
    names: list[str],
    limit: int,
    me: str,
    shared: Shared,
    out: Any,
) -> None:
    """Take and give back the locks ``names`` (``limit`` holders each) until stopped, one fresh
    job id per attempt. Event per acquire that returned a token: ``(name, token, start, got,
    let, confirmed)``: sent at ``start``, returned at ``got``, release sent at ``let``;
    ``confirmed`` when the release freed that very token (the server still had it)."""
    report = Report(me)

    def body() -> None:
        with target.connect(wait) as client:
            locks = [client.lock(name, ttl=3, limit=limit) for name in names]
            n = 0
            while not shared.stop.is_set():
                lock, job = locks[n % len(locks)], f"{me}-{n}"
                n += 1
                start = tick(shared.clock)
                try:
                    token = lock.acquire(job)
                except fastlock.FastlockError as exc:  # short of replicas, or may have run: give back
                    _count(report, exc, shared, "acquire")
                    _give_back(lock, job, report, shared)
                    time.sleep(0.005)
                    continue
                if token is None:
                    continue
                got = tick(shared.clock)
                time.sleep(0.001)  # hold it a moment: overlaps get a chance to show
                let = tick(shared.clock)
                try:
                    freed = lock.release(job)
                except fastlock.FastlockError as exc:
                    _count(report, exc, shared, "release")
                    freed = None
                report.events.append((lock.digest, token, start, got, let, freed == token))
                if freed == token:
                    shared.made_progress(start)

    _run(report, out, body)


def _give_back(lock: Any, job: str, report: Report, shared: Shared) -> None:
    try:
        lock.release(job)
    except fastlock.FastlockError as exc:
        _count(report, exc, shared, "give-back")  # the ttl ends it


STALE_EVERY = 6
"""Every STALE_EVERY-th turn is a stale cycle on the worker's own queue (in the same slot):
claim a job with a short lease, recover until the server shows the lease gone, claim it again
(a short queue: it comes back at once), then complete it with the first claim (stale: must be
refused) and with the second."""


def claim_worker(
    target: Target, wait: tuple[int, int] | None, queue_name: str, me: str, shared: Shared, out: Any
) -> None:
    """Claim and complete jobs of ``queue_name`` one at a time until stopped, with stale
    cycles on ``queue_name + "-" + me``. ``report.claims``: ``(queue, job id, token, start, end)``
    of each claim that returned; ``report.events``: ``(job id, token, start, end, outcome,
    stale)`` per completion attempt, ``outcome`` "ok", "lost" (:class:`LeaseLost`) or
    "error" (may have run: sent again until ok or lost)."""
    report = Report(me)

    def body() -> None:
        with target.connect(wait) as client:
            queue, own = client.queue(queue_name, lease=10.0), client.queue(f"{queue_name}-{me}", lease=10.0)
            n = 0
            while not shared.stop.is_set():
                n += 1
                if n % STALE_EVERY == 0:
                    _stale_cycle(own, report, shared)
                    continue
                jobs = _claim(queue, None, report, shared)
                if jobs is None:
                    continue
                if not jobs:
                    _recover(queue, report, shared)
                    time.sleep(0.01)
                    continue
                _complete(queue, jobs, False, report, shared)
                time.sleep(0.005)  # a pace that keeps jobs for every phase

    _run(report, out, body)


def _claim(queue: Any, lease: float | None, report: Report, shared: Shared) -> list[Any] | None:
    """One job claimed (recorded), none, or ``None`` after an error (counted)."""
    start = tick(shared.clock)
    try:
        jobs = queue.claim(1, lease=lease)
    except fastlock.FastlockError as exc:  # ReplicationError: leased, comes back by recover
        _count(report, exc, shared, "claim")
        time.sleep(0.01)
        return None
    end = tick(shared.clock)
    report.claims.extend((queue.name, job.id, job.token, start, end) for job in jobs)
    return list(jobs)


def _stale_cycle(queue: Any, report: Report, shared: Shared) -> None:
    first = _claim(queue, 0.2, report, shared)
    if not first:
        if first is not None:
            try:
                queue.enqueue(b"stale")  # not WAITed: if the kill loses it, the next cycle adds one
            except fastlock.FastlockError as exc:
                _count(report, exc, shared, "enqueue")
        return
    if not _lease_lost(queue, first[0], report, shared):
        report.errors["stale lease never seen lost"] += 1
        return
    again = _claim(queue, None, report, shared)
    _complete(queue, first, True, report, shared)
    if again:
        _complete(queue, again, False, report, shared)


def _recover(queue: Any, report: Report, shared: Shared) -> None:
    try:
        queue.recover()
    except fastlock.FastlockError as exc:
        _count(report, exc, shared, "recover")


def _lease_lost(queue: Any, job: Any, report: Report, shared: Shared) -> bool:
    """Recover until the server no longer shows ``job``'s lease (bounded)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        _recover(queue, report, shared)
        try:
            info = queue.job(job.id)
        except fastlock.FastlockError as exc:
            _count(report, exc, shared, "job")
        else:
            if info.state != "active" or info.token != job.token:
                return True
        time.sleep(0.02)
    return False


def _complete(queue: Any, jobs: list[Any], stale: bool, report: Report, shared: Shared) -> None:
    """Complete ``jobs``, sending again after an error that may have run (complete is
    idempotent by token) until it is accepted or refused; every attempt is an event."""
    deadline = time.monotonic() + 30
    while True:
        start = tick(shared.clock)
        try:
            queue.complete(jobs)
        except fastlock.LeaseLost as exc:
            end, lost = tick(shared.clock), {job.id for job in exc.jobs}
            for job in jobs:
                report.events.append(
                    (job.id, job.token, start, end, "lost" if job.id in lost else "ok", stale)
                )
            if stale and lost:
                shared.made_progress(start, 1)
            return
        except fastlock.FastlockError as exc:
            _count(report, exc, shared, "complete")
            end = tick(shared.clock)
            report.events.extend((job.id, job.token, start, end, "error", stale) for job in jobs)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        end = tick(shared.clock)
        report.events.extend((job.id, job.token, start, end, "ok", stale) for job in jobs)
        if not stale:
            shared.made_progress(start)
        return
