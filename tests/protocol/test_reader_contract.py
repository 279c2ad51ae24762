"""The reply reader's contract beyond the bytes it parses, alike in both cores and as hiredis
keeps it (issue 23): ``feed(data, offset, length)``'s range checks, and the type of a RESP3
push reply."""

from __future__ import annotations

import socket
from typing import Any

import hiredis
import pytest
from harness.cores import CYTHON_CORE, core_params
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py

CORES = core_params(CYTHON_CORE, _core_py)
SSIZE_MIN, SSIZE_MAX = -(2**63), 2**63 - 1

# --- feed(data, offset=0, length=-1) ---------------------------------------------------
# ``length`` -1 (the default) means "to the end"; any other negative length, a negative
# offset, or a range past the end of the buffer is an ArgumentError (a ValueError, as in
# hiredis), raised before anything is taken. An int that is no C ssize_t is an OverflowError,
# a non-integer a TypeError, as hiredis and any C-sized argument.


def expected_slice(data: bytes, offset: int, length: int) -> bytes | type[Exception]:
    """The bytes ``feed(data, offset, length)`` takes, or the exception it raises."""
    if not (SSIZE_MIN <= offset <= SSIZE_MAX and SSIZE_MIN <= length <= SSIZE_MAX):
        return OverflowError
    if length == -1:
        length = len(data) - offset
    if offset < 0 or length < 0 or offset + length > len(data):
        return fastlock.ArgumentError
    return data[offset : offset + length]


def fed(reader: Any, data: Any, *args: Any, expected: int = 0) -> Any:
    """The bulk string the reader reads when ``feed(data, *args)`` brings its payload
    (``expected`` bytes), or the exception type and message ``feed`` raises."""
    reader.feed(b"$%d\r\n" % expected)
    try:
        reader.feed(data, *args)
    except (ValueError, OverflowError, TypeError) as exc:
        return type(exc), str(exc)
    reader.feed(b"\r\n")
    return reader.gets()


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    ("args", "taken"),
    [
        ((), b"abcd"),
        ((1,), b"bcd"),
        ((4,), b""),
        ((1, 2), b"bc"),
        ((0, -1), b"abcd"),
        ((3, -1), b"d"),
        ((4, 0), b""),
        ((0, 4), b"abcd"),
    ],
)
def test_feed_takes_the_range_given(core: Any, args: tuple[int, ...], taken: bytes) -> None:
    for data in (b"abcd", bytearray(b"abcd"), memoryview(b"xabcdx")[1:5]):
        assert fed(core.ReplyReader(), data, *args, expected=len(taken)) == taken
    assert fed(hiredis.Reader(), b"abcd", *args, expected=len(taken)) == taken


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    "args",
    [
        *[(5,), (-1,), (0, -2), (0, -3), (1, 4), (0, 5), (5, 0), (-1, 1), (-1, -1)],
        *[(2**62, 2**62), (3, SSIZE_MAX), (SSIZE_MAX, SSIZE_MAX), (SSIZE_MIN, -1)],
    ],
)
def test_feed_refuses_a_range_outside_the_buffer(core: Any, args: tuple[int, ...]) -> None:
    reader = core.ReplyReader()
    pattern = r"^feed\(\): offset -?\d+ and length -?\d+ select no bytes of a 4-byte buffer"
    with pytest.raises(fastlock.ArgumentError, match=pattern) as info:
        reader.feed(b"abcd", *args)
    assert isinstance(info.value, ValueError)
    assert not reader.has_data()  # nothing was taken
    reader.feed(b":1\r\n")
    assert reader.gets() == 1
    if max(map(abs, args)) < 2**31:  # hiredis adds them unchecked: no overflow for it
        with pytest.raises(ValueError):
            hiredis.Reader().feed(b"abcd", *args)


@pytest.mark.parametrize("core", CORES)
def test_feed_arguments_are_c_sized_integers(core: Any) -> None:
    bad_values = [(2**63, OverflowError), (SSIZE_MIN - 1, OverflowError), (1.0, TypeError), (None, TypeError)]
    for bad, error in bad_values:
        for args in [(bad,), (0, bad)]:
            with pytest.raises(error) as info:
                core.ReplyReader().feed(b"abcd", *args)
            with pytest.raises(error) as theirs:
                hiredis.Reader().feed(b"abcd", *args)
            assert type(info.value) is type(theirs.value)


offsets = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([SSIZE_MIN, SSIZE_MAX, 2**62, -(2**62), 2**63, -(2**63) - 1]),
)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=8), offsets, offsets, st.booleans())
def test_both_cores_and_hiredis_feed_alike(data: bytes, offset: int, length: int, default: bool) -> None:
    args = (offset,) if default else (offset, length)
    want = expected_slice(data, offset, -1 if default else length)
    size = len(want) if isinstance(want, bytes) else 0
    cores = [_core_py, *([CYTHON_CORE] if CYTHON_CORE is not None else [])]
    outcomes = [fed(core.ReplyReader(), data, *args, expected=size) for core in cores]
    assert all(outcome == outcomes[0] for outcome in outcomes)  # same bytes, or same error and text
    assert outcomes[0] == want if isinstance(want, bytes) else outcomes[0][0] is want
    if max(abs(offset), abs(length)) < 2**31:  # hiredis adds them unchecked: no overflow for it
        theirs = fed(hiredis.Reader(), data, *args, expected=size)
        assert theirs == want if isinstance(want, bytes) else issubclass(want, theirs[0])


# --- RESP3 pushes -----------------------------------------------------------------------
# A push (``>``) is a hiredis.PushNotification from both cores, as from hiredis: a list, so
# code reading it as one keeps working, and a type of its own, so an out-of-band message
# (a subscription's message, a tracking invalidation) is never taken for an array reply.

PUSHES = [
    (b">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n", [b"invalidate", [b"k"]]),
    (b">0\r\n", []),
    (b">-1\r\n", None),
    (b"*2\r\n>1\r\n:1\r\n:2\r\n", [[1], 2]),
    (b">1\r\n>1\r\n:3\r\n", [[3]]),
    (b"%1\r\n+k\r\n>1\r\n:4\r\n", {b"k": [4]}),
]


def push_types(value: Any) -> Any:
    """``value`` with every list replaced by (its type, its items): what equality hides."""
    if isinstance(value, list):
        return (type(value), [push_types(item) for item in value])
    if isinstance(value, dict):
        return {key: push_types(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("stream", "value"), PUSHES)
def test_a_push_is_a_push_notification(core: Any, stream: bytes, value: Any) -> None:
    theirs = hiredis.Reader()
    theirs.feed(stream)
    reply = theirs.gets()
    for cut in range(1, len(stream) + 1):  # whole, and split anywhere
        reader = core.ReplyReader()
        reader.feed(stream[:cut])
        reader.feed(stream[cut:])
        ours = reader.gets()
        assert ours == value and push_types(ours) == push_types(reply)
    top = core.ReplyReader()
    top.feed(stream)
    if stream.startswith(b">") and value is not None:
        assert isinstance(top.gets(), hiredis.PushNotification)


@pytest.mark.parametrize("core", CORES)
def test_a_server_push_reads_alike(core: Any, redis_url: str) -> None:
    """A RESP3 SUBSCRIBE confirmation is a push on the wire: read by each reader alike."""
    host, port = redis_url.removeprefix("redis://").split("/")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n")
        theirs, ours = hiredis.Reader(), core.ReplyReader()
        replies: list[Any] = []
        while len(replies) < 2:
            data = sock.recv(65536)
            assert data, "the server closed the connection"
            theirs.feed(data)
            ours.feed(data)
            while (reply := ours.gets()) is not core.NOT_ENOUGH:
                replies.append(reply)
                assert push_types(reply) == push_types(theirs.gets())
    assert type(replies[1]) is hiredis.PushNotification and replies[1] == [b"subscribe", b"ch", 1]
