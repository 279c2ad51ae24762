"""Chaos from several processes (the "spawn" start method, each with its own client) while the
master of the scenario's keys is failed over twice, on a cluster (chaos_setups.ClusterSetup:
``CLUSTER FAILOVER`` of the primary of the keys' slot) and on a Sentinel deployment
(SentinelSetup: ``SENTINEL FAILOVER``, the deposed master then made a replica): the failover
(phase 1), then ``kill -9`` of the new master (phase 2; the killed node is revived as a
replica, so that WAIT can be answered again). Redis and Valkey, deployments of the module's own.

What can be asserted soundly, with the events stamped by a logical clock shared by the
processes (chaos_workers.py):

- **Holders** (with or without WAIT): a holding counts when its release freed that very token
  (the server still had it, so no write of it was lost and it had not expired). Such holdings
  never overlap more than ``limit`` deep: the last of ``limit + 1`` acquires would have met the
  others on the surviving history. Without WAIT on Sentinel, the holdings begun before the
  deposed master was made a replica and ended after the failover began are left out: each
  master may have granted one (with WAIT, the deposed master grants nothing: no replica acks).
- **Tokens** (WAIT on): an acknowledged acquire or claim is on the one replica, which is the one
  promoted, so tokens handed out are distinct and a call sent after another returned gets a
  higher one. Without WAIT the counter can go back on kill -9: not asserted there.
- **Claims** (WAIT on): none lost: every job ends completed, dead or still queued; a job is
  completed twice only when the earlier completion ran on a master that lost it (sent before
  the kill returned, returned after the first failover began): complete is not WAITed. A
  completion sent after a later claim of the same job returned, or (on a history that loses
  nothing: before the kill on a cluster, before the failover on Sentinel) after the worker saw
  its lease gone, is refused (:class:`LeaseLost`). Each worker makes such stale completions on
  a short queue of its own (in the same slot), where a recovered job is claimed again at once.

Errors that failover allows (the setup's ``allowed``: connection lost, may have run, short of
replicas, cluster down) are counted by type and phase and printed (phase 2 begins once the kill
returned, so errors of the kill itself mostly count in phase 1); any other error fails the
test, and progress is asserted in each phase (for claims, a refused stale completion too).
"""

from __future__ import annotations

import multiprocessing
import queue as queues
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from chaos_setups import ClusterSetup, SentinelSetup, Setup
from chaos_workers import NEVER, Report, Shared, claim_worker, lock_worker, tick
from harness.size import sized

from fastlock.testing.cluster import TempCluster, wait_until
from fastlock.testing.sentinel import TempSentinels

pytestmark = [pytest.mark.fault, pytest.mark.slow]  # slow tier: processes through failovers

WAIT = (1, 500)
PROCESSES = 3
NEED = sized(10, 4)
"""Progress asserted in each phase: confirmed lock cycles or accepted completions."""
DOWN_AFTER = 2000
"""The sentinels' ``down-after-milliseconds``: under the workers' load, a master may miss PINGs
for 500 ms, and a failover nobody asked for would lose writes before the scenario's own."""


def _spawn(work: Callable[..., None], args: tuple[Any, ...], shared: Shared, out: Any) -> list[Any]:
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=work, args=(*args, f"p{i}", shared, out)) for i in range(PROCESSES)]
    for proc in procs:
        proc.start()
    return procs


def _shared() -> Shared:
    context = multiprocessing.get_context("spawn")
    phases = context.Array("q", [0, NEVER, NEVER])
    return Shared(context.Value("q", 0), phases, context.Array("q", 6), context.Event())


def _chaos(setup: Setup, shared: Shared, procs: list[Any], stale: int = 0) -> dict[str, int]:
    """Phase 0, then the failover, then kill -9 of the new master and its revival, each until
    the workers made progress (and ``stale`` stale completions were refused); the ticks around
    the failovers."""

    def progress(phase: int) -> None:
        def made() -> bool:
            return shared.progress[phase] >= NEED and shared.progress[3 + phase] >= stale

        def done() -> bool:
            return made() or not all(p.is_alive() for p in procs)

        wait_until(done, 60, f"progress in phase {phase}", step=0.02)
        assert made(), f"a worker died in phase {phase}"

    marks: dict[str, int] = {}
    progress(0)
    marks["failover"] = tick(shared.clock)
    setup.failover()
    shared.phases[1] = marks["failed over"] = tick(shared.clock)
    progress(1)
    setup.wait_stable()  # the old master is a synced replica of the new one
    marks["kill"] = tick(shared.clock)
    setup.kill()
    shared.phases[2] = marks["killed"] = tick(shared.clock)
    setup.revive()
    progress(2)
    return marks


def _collect(shared: Shared, procs: list[Any], out: Any) -> list[Report]:
    shared.stop.set()
    reports = []
    try:
        for _ in procs:
            reports.append(out.get(timeout=120))
    except queues.Empty:
        pytest.fail(f"{PROCESSES - len(reports)} workers sent no report")
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    failures = [f"{r.me}:\n{r.failure}" for r in reports if r.failure]
    assert not failures, "\n".join(failures)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    return reports


def _errors(reports: list[Report], allowed: tuple[str, ...]) -> Counter[str]:
    errors: Counter[str] = Counter()
    for report in reports:
        errors.update(report.errors)
    samples = {key: text for report in reports for key, text in report.samples.items()}
    unexpected = [(e, samples.get(e)) for e in errors if e.split()[1] not in allowed]
    assert not unexpected, f"errors no failover explains: {unexpected}"
    return errors


def _max_overlap(holdings: list[tuple[int, int]]) -> int:
    """The most intervals ``(from, to)`` open at one tick (ticks are distinct)."""
    edges = sorted([(start, 1) for start, _ in holdings] + [(end, -1) for _, end in holdings])
    deepest = depth = 0
    for _, step in edges:
        depth += step
        deepest = max(deepest, depth)
    return deepest


def _backwards(calls: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The calls ``(token, start, end)`` that got a token not above that of a call which had
    returned before they were sent."""
    by_end, bad, best, i = sorted(calls, key=lambda c: c[2]), [], 0, 0
    for call in sorted(calls, key=lambda c: c[1]):
        while i < len(by_end) and by_end[i][2] < call[1]:
            best, i = max(best, by_end[i][0]), i + 1
        if call[0] <= best:
            bad.append(call)
    return bad


def _check_tokens(calls: dict[Any, list[tuple[int, int, int]]]) -> None:
    for key, made in calls.items():
        tokens = [c[0] for c in made]
        assert len(tokens) == len(set(tokens)), f"{key}: a token handed out twice"
        assert not _backwards(made), f"{key}: tokens went backwards: {_backwards(made)[:5]}"


@pytest.fixture(scope="module", params=["cluster", "sentinel"])
def deployment(request: pytest.FixtureRequest, flavour_binary: tuple[str, str]) -> Iterator[Setup]:
    """A cluster or a Sentinel deployment of the module's own."""
    flavour, binary = flavour_binary
    if request.param == "cluster":
        with TempCluster(binary, flavour) as cluster:
            yield ClusterSetup(cluster)
    else:
        with TempSentinels(binary, flavour, down_after=DOWN_AFTER) as sentinels:
            yield SentinelSetup(sentinels)


@pytest.fixture
def setup(deployment: Setup) -> Iterator[Setup]:
    deployment.wait_stable()
    yield deployment
    deployment.wait_stable()


@pytest.mark.parametrize(
    ("limit", "wait"), [(1, WAIT), (3, WAIT), (1, None)], ids=["limit1-wait", "limit3-wait", "limit1"]
)
def test_locks_from_processes_through_two_failovers(
    setup: Setup, limit: int, wait: tuple[int, int] | None
) -> None:
    with setup.client() as client:
        names = setup.names(client, 4, f"chaos-{limit}-{wait is not None}")
    shared, out = _shared(), multiprocessing.get_context("spawn").Queue()
    procs = _spawn(lock_worker, (setup.target, wait, names, limit), shared, out)
    try:
        marks = _chaos(setup, shared, procs)
    finally:
        reports = _collect(shared, procs, out)
    errors = _errors(reports, setup.allowed)
    holdings, calls = defaultdict(list), defaultdict(list)
    split = setup.split and wait is None  # each master may have granted a lock meanwhile
    for report in reports:
        for digest, token, start, got, let, confirmed in report.events:
            calls[digest].append((token, start, got))
            if confirmed and not (split and start < marks["failed over"] and marks["failover"] < let):
                holdings[digest].append((got, let))
    events = [e for r in reports for e in r.events]
    print(
        f"\n{setup.flavour} {type(setup).__name__} limit {limit} wait {wait}: {len(events)} acquires"
        f" ({sum(map(len, holdings.values()))} confirmed and checked), progress {list(shared.progress)[:3]},"
        f" errors {dict(errors)}"
    )
    for digest, held in holdings.items():
        assert _max_overlap(held) <= limit, f"{digest}: more than {limit} holders at once"
    if wait is not None:
        _check_tokens(calls)


def _queued(client: Any, name: str) -> set[str]:
    """The ids of the jobs still in the queue (ready, delayed, active) or dead."""
    queue, ids = client.queue(name), set()
    for state in ("ready", "delayed", "active", "dead"):
        offset = 0
        while True:
            page = queue.peek(state, offset=offset, count=1000)
            ids.update(job.id for job in page.jobs)
            offset += len(page.jobs)
            if not page.jobs or offset >= page.total:
                break
    return ids


def test_claims_from_processes_through_two_failovers(setup: Setup) -> None:
    name = "{chaos}jobs"  # the workers' own queues ({chaos}jobs-p0...) share its slot
    with setup.client(WAIT) as client:
        queue = client.queue(name)
        enqueued = set(queue.enqueue_many([b"x"] * 3000))
        setup.aim(queue.keys[0])
        setup.wait_stable()  # the jobs on the replica (a Sentinel failover does not wait for it)
        shared, out = _shared(), multiprocessing.get_context("spawn").Queue()
        procs = _spawn(claim_worker, (setup.target, WAIT, name), shared, out)
        try:
            marks = _chaos(setup, shared, procs, stale=1)
        finally:
            reports = _collect(shared, procs, out)
        errors = _errors(reports, setup.allowed)
        remaining = _queued(client, name)
    claims = [c for r in reports for c in r.claims]
    attempts = [e for r in reports for e in r.events]
    accepted: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for attempt in attempts:
        if attempt[4] == "ok":
            accepted[attempt[0]].append(attempt)
    lost = enqueued - set(accepted) - remaining
    assert not lost, f"{len(lost)} jobs neither completed nor queued nor dead: {sorted(lost)[:5]}"
    for job_id, done in accepted.items():  # twice: only when a failover lost the earlier one
        earlier = sorted(done, key=lambda a: a[2])[: None if job_id in remaining else -1]
        for start, end in ((a[2], a[3]) for a in earlier):
            assert marks["failover"] < end and start < marks["killed"], f"{job_id} completed twice: {done}"
    reclaimed: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _, job_id, token, _, end in claims:
        reclaimed[job_id].append((token, end))
    stale = [a for a in attempts if any(t > a[1] and end < a[2] for t, end in reclaimed[a[0]])]
    seen = [a for a in attempts if a[5] and a[3] < marks[setup.lossless_until]]
    for attempt in stale + seen:
        assert attempt[4] != "ok", (
            f"a stale completion was accepted: {attempt}, marks {marks},"
            f" its job's claims {[c for c in claims if c[1] == attempt[0]]},"
            f" attempts {[a for a in attempts if a[0] == attempt[0]]}"
        )
    print(
        f"\n{setup.flavour} {type(setup).__name__} claims: {len(claims)} claims, {len(attempts)} completions"
        f" ({sum(map(len, accepted.values()))} accepted, {len(stale)} after a re-claim,"
        f" {len(seen)} seen stale before the {setup.lossless_until}: all refused), {len(remaining)} left,"
        f" progress {list(shared.progress)[:3]}, errors {dict(errors)}"
    )
    assert stale, "no completion was tried after a later claim of its job"
    fenced: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for queue_name, _, token, start, end in claims:
        fenced[queue_name].append((token, start, end))
    _check_tokens(fenced)
