"""The lease member format and the reply parsers, sans-IO (no server): a member encodes and
decodes both ways, a claim reply gives the jobs ``Member.decode`` gives, and a reply of the
wrong shape is a ProtocolError."""

from __future__ import annotations

from typing import Any

import pytest
from harness.cores import CYTHON_CORE, needs_cython
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py
from fastlock._impl import default_core
from fastlock.queues.ids import due_ms
from fastlock.queues.jobs import Batch, Job, Member, claimed, completed, enqueued, extended, queue_stats

CORE = default_core()

MEMBERS = [
    Member(1, 1, "", "", "~00ff"),
    Member(2**53, 7, "1048575", "d" + "a" * 64, "order|42|x"),
    Member(3, 2, "0", "", "é"),
]


@pytest.mark.parametrize("member", MEMBERS, ids=["plain", "prioritised-unique", "non-ascii"])
def test_a_member_round_trips(member: Member) -> None:
    assert Member.decode(member.encode()) == member


def test_the_member_format_is_the_documented_one() -> None:
    assert Member(12, 3, "5", "dabc", "a|b").encode() == b"12|3|5|dabc|a|b"
    for bad in (b"1|1|x", b"", b"x|1|||id"):
        with pytest.raises(ValueError):
            Member.decode(bad)


def test_a_claim_gives_the_jobs_of_its_members() -> None:
    reply: list[Any] = [1000, -1]
    for member in MEMBERS:
        reply += [member.encode(), f"payload {member.id}".encode()]
    batch = claimed(reply, CORE)
    assert batch.next_due_in is None
    for job, member in zip(batch, MEMBERS, strict=True):
        assert (job.id, job.attempt, job.token) == (member.id, member.attempt, member.token)
        assert Member.decode(job.member) == member and job.payload == f"payload {member.id}".encode()


def test_an_empty_claim_gives_the_next_due_time() -> None:
    assert claimed([1000, 3500], CORE).next_due_in == 2.5
    assert claimed([1000, -1], CORE).next_due_in is None
    assert claimed([1000, 500], CORE).next_due_in == 0.0


def test_lost_leases_are_named_by_index() -> None:
    jobs = [Job(m.id, b"", m.attempt, m.token, m.encode()) for m in MEMBERS]
    assert extended([1000, 2], jobs) == [jobs[1]] and jobs[1].lost and not jobs[0].lost
    with pytest.raises(fastlock.LeaseLost) as info:
        completed([[1, 3], []], jobs, 1, CORE)
    assert info.value.jobs == [jobs[0], jobs[2]]


@pytest.mark.parametrize(
    ("parse", "reply"),
    [
        (lambda reply: claimed(reply, CORE), [1000, -1, b"1|1|||x"]),
        (lambda reply: claimed(reply, CORE), [1000, -1, b"1|1", b"p"]),
        (lambda reply: claimed(reply, CORE), None),
        (lambda reply: extended(reply, []), [1000, 1]),
        (lambda reply: completed(reply, [], 0, CORE), [[0], []]),
        (queue_stats, [1, 2, 3, 4]),
        (queue_stats, [1, 2, 3, 4, b"5"]),
    ],
)
def test_unexpected_shapes_are_protocol_errors(parse: Any, reply: Any) -> None:
    with pytest.raises(fastlock.ProtocolError):
        parse(reply)


def test_an_error_reply_among_the_stats_is_raised() -> None:
    error = fastlock.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    with pytest.raises(fastlock.ResponseError):
        queue_stats([1, error, 3, 4, 5])


def _fields(outcome: Any) -> Any:
    """A batch as comparable data (each job's fields, its class, and ``next_due_in``)."""
    if isinstance(outcome, Batch):
        jobs = [(type(j), j.id, j.payload, j.attempt, j.token, j.member, j.lost) for j in outcome]
        return type(outcome), jobs, outcome.next_due_in
    return outcome


def _claimed_in_python(reply: Any) -> Any:
    try:
        return _fields(claimed(reply, _core_py))
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc)


_PART = st.sampled_from([b"", b"0", b"7", b"0042", b"9" * 18, b"9" * 19, b"-1", b"+1", b" 1", b"1_0", b"x"])
_MEMBER = st.builds(
    lambda token, attempt, priority, unique, job_id: b"|".join([token, attempt, priority, unique, job_id]),
    _PART, _PART, st.sampled_from([b"", b"5"]), st.sampled_from([b"", b"d" + b"a" * 64]),
    st.text().map(str.encode) | st.binary(max_size=6) | st.just(b"a|b"),
) | st.binary(max_size=12)  # fmt: skip
_PAIRS = st.lists(st.tuples(_MEMBER, st.binary(max_size=4) | st.none()), min_size=1, max_size=5)
_REPLY = st.builds(
    lambda head, pairs: [*head, *(item for pair in pairs for item in pair)],
    st.sampled_from([[1000, -1], [1000, 3500]]),
    _PAIRS,
) | st.lists(_MEMBER | st.text(max_size=3) | st.none() | st.integers(), max_size=6) | st.none()  # fmt: skip


@needs_cython
@settings(max_examples=1000, deadline=None)
@given(reply=_REPLY)
def test_the_core_reads_a_claim_as_claimed_does(reply: Any) -> None:
    """``_core._claimed_jobs`` (_coreparts/domain_jobs.pxi) gives the batch the pure-Python ``claimed``
    gives, or None for a reply it leaves to it; ``claimed`` with the core gives the same
    batch or the same error as without it."""
    fast = CYTHON_CORE._claimed_jobs(reply, Job, Batch)  # type: ignore[union-attr]
    expected = _claimed_in_python(reply)
    assert fast is None or _fields(fast) == expected
    try:
        assert _fields(claimed(reply, CYTHON_CORE)) == expected  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - compared
        assert (type(exc), str(exc)) == expected


@needs_cython
def test_the_core_reads_the_common_claims_itself() -> None:
    """Every well-formed claim of at least one job is read in C (the fast path is taken)."""
    reply: list[Any] = [1000, -1]
    for member in MEMBERS:
        reply += [member.encode(), b"p"]
    fast = CYTHON_CORE._claimed_jobs(reply, Job, Batch)  # type: ignore[union-attr]
    assert fast is not None and _fields(fast) == _claimed_in_python(reply)
    assert CYTHON_CORE._claimed_jobs([1000, -1], Job, Batch) is None  # an empty claim: Python's  # type: ignore[union-attr]


def _enqueued_in_python(reply: Any, job_id: str) -> Any:
    try:
        return enqueued(reply, job_id)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc)


_ID = st.sampled_from(["~0ab", "order-7", "é", "", "\ud800"]) | st.text(max_size=4)


@needs_cython
@settings(max_examples=1000, deadline=None)
@given(
    reply=st.tuples(
        st.sampled_from([1, 0, 2, True, 1.0, -1, b"1", None]),
        _ID.map(lambda text: text.encode("utf-8", "surrogatepass")) | st.binary(max_size=4) | st.none(),
    ).map(list)
    | st.lists(st.integers(0, 2) | st.binary(max_size=3), max_size=3)
    | st.none(),
    job_id=_ID,
)
def test_the_core_reads_an_enqueue_reply_as_enqueued_does(reply: Any, job_id: str) -> None:
    """``_core._enqueued`` (_coreparts/domain_jobs.pxi) gives the id the pure-Python
    ``enqueued`` gives, or None for a reply it leaves to it."""
    fast = CYTHON_CORE._enqueued(reply, job_id)  # type: ignore[union-attr]
    assert fast is None or fast == _enqueued_in_python(reply, job_id)


@needs_cython
def test_the_core_reads_the_common_enqueue_replies_itself() -> None:
    """A reply that added its (ASCII) job is read in C; any other is ``enqueued``'s."""
    assert CYTHON_CORE._enqueued([1, b"~00ff"], "~00ff") == "~00ff"  # type: ignore[union-attr]
    for reply, job_id in (([0, b"~00ff"], "~00ff"), ([1, b"~00fe"], "~00ff"), ([1, "é".encode()], "é")):
        assert CYTHON_CORE._enqueued(reply, job_id) is None  # type: ignore[union-attr]


_JOBS = [Job("a", b"p", 1, 1, b"1|1|||a"), Job("b", b"p", 1, 2, b"2|1|||b")]


def _completed_in_python(reply: Any, claim: int) -> Any:
    try:
        return _fields(completed(reply, _JOBS, claim, _core_py))
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc), getattr(exc, "jobs", None)


@needs_cython
@settings(max_examples=1000, deadline=None)
@given(
    reply=st.tuples(st.sampled_from([[], [1], [3], [0], ()]) | st.none(), _REPLY).map(list)
    | st.lists(st.just([]) | _REPLY, max_size=3)
    | st.none(),
    claim=st.integers(1, 2),
)
def test_the_core_reads_a_complete_reply_as_completed_does(reply: Any, claim: int) -> None:
    """``_core._completed_jobs`` (_coreparts/domain_jobs.pxi) gives the batch the pure-Python
    ``completed`` gives for a complete that claimed (the queue shells ask it only then), or
    None for a reply it leaves to it."""
    fast = CYTHON_CORE._completed_jobs(reply, Job, Batch)  # type: ignore[union-attr]
    assert fast is None or _fields(fast) == _completed_in_python(reply, claim)


@needs_cython
def test_the_core_reads_the_common_complete_replies_itself() -> None:
    """A complete that lost no lease and claimed jobs is read in C; any other is ``completed``'s."""
    claim: list[Any] = [1000, -1]
    for member in MEMBERS:
        claim += [member.encode(), b"p"]
    fast = CYTHON_CORE._completed_jobs([[], claim], Job, Batch)  # type: ignore[union-attr]
    assert fast is not None and _fields(fast) == _completed_in_python([[], claim], 1)
    for left in ([[1], []], [[], []], [[], [1000, -1]], [[], claim, 1], ([], claim)):
        assert CYTHON_CORE._completed_jobs(left, Job, Batch) is None  # type: ignore[union-attr]


@needs_cython
@settings(max_examples=500, deadline=None)
@given(
    head=st.text(max_size=4) | st.sampled_from(["~0123456789abcdef-", "x" * 141]),
    numbers=st.lists(st.integers(0, 2**70) | st.integers(-5, -1) | st.just(1.5), max_size=6),
    extra=st.integers(-2, 3),
)
def test_the_core_writes_fresh_ids_as_the_python_twin_does(head: str, numbers: list[Any], extra: int) -> None:
    """``_core._numbered`` (_coreparts/domain_jobs.pxi) gives its pure twin's ids, or its error (the
    numbers may run out, or be of the wrong kind; a count may be negative)."""
    from fastlock import _core_py

    def outcome(write: Any) -> Any:
        try:
            return write(head, iter(numbers), len(numbers) - extra)
        except Exception as exc:  # noqa: BLE001 - compared
            return type(exc), str(exc)

    assert outcome(CYTHON_CORE._numbered) == outcome(_core_py._numbered)  # type: ignore[union-attr]


@needs_cython
@settings(max_examples=500, deadline=None)
@given(
    prefix=st.text(max_size=4) | st.sampled_from(["0123456789abcdef-", "x" * 141]),
    numbers=st.lists(st.integers(0, 2**70) | st.integers(-5, -1) | st.just(1.5), max_size=4),
    now=st.floats(-10, 4e9, allow_nan=False) | st.sampled_from([1796528280.781, 0.0]),
    delay_ms=st.integers(0, 366 * 86_400_000),
)
def test_the_core_writes_due_fresh_ids_as_the_python_twin_does(
    prefix: str, numbers: list[Any], now: float, delay_ms: int
) -> None:
    """``_core._fresh`` and ``_fresh_id`` (the due time then the numbered id) give their pure
    twins' ids, or their errors; ``due_ms`` reads the due time back."""
    from fastlock import _core_py

    def outcome(write: Any, *args: Any) -> Any:
        try:
            return write(prefix, iter(numbers), *args)
        except Exception as exc:  # noqa: BLE001 - compared
            return type(exc), str(exc)

    for args in ((len(numbers), now, delay_ms), (now, delay_ms)):
        write = CYTHON_CORE._fresh if len(args) == 3 else CYTHON_CORE._fresh_id  # type: ignore[union-attr]
        twin = _core_py._fresh if len(args) == 3 else _core_py._fresh_id
        found = outcome(write, *args)
        assert found == outcome(twin, *args)
        if isinstance(found, str) and "." not in prefix:
            assert due_ms(found) == (int(now * 1000) if now > 0 else 0) + delay_ms
