"""The lease member format and the reply parsers, sans-IO (no server): a member encodes and
decodes both ways, a claim reply gives the jobs ``Member.decode`` gives, and a reply of the
wrong shape is a ProtocolError."""

from __future__ import annotations

from typing import Any

import pytest

import fastlock
from fastlock.queues.jobs import Job, Member, claimed, completed, extended, queue_stats

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
    batch = claimed(reply)
    assert batch.next_due_in is None
    for job, member in zip(batch, MEMBERS, strict=True):
        assert (job.id, job.attempt, job.token) == (member.id, member.attempt, member.token)
        assert Member.decode(job.member) == member and job.payload == f"payload {member.id}".encode()


def test_an_empty_claim_gives_the_next_due_time() -> None:
    assert claimed([1000, 3500]).next_due_in == 2.5
    assert claimed([1000, -1]).next_due_in is None
    assert claimed([1000, 500]).next_due_in == 0.0


def test_lost_leases_are_named_by_index() -> None:
    jobs = [Job(m.id, b"", m.attempt, m.token, m.encode()) for m in MEMBERS]
    assert extended([1000, 2], jobs) == [jobs[1]] and jobs[1].lost and not jobs[0].lost
    with pytest.raises(fastlock.LeaseLost) as info:
        completed([[1, 3], []], jobs, 1)
    assert info.value.jobs == [jobs[0], jobs[2]]


@pytest.mark.parametrize(
    ("parse", "reply"),
    [
        (claimed, [1000, -1, b"1|1|||x"]),
        (claimed, [1000, -1, b"1|1", b"p"]),
        (claimed, None),
        (lambda reply: extended(reply, []), [1000, 1]),
        (lambda reply: completed(reply, [], 0), [[0], []]),
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
