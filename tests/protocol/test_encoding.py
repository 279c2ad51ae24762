"""The RESP writer and reply reader of both cores: exact bytes, exact errors, no drift."""

from __future__ import annotations

import enum
import math
import socket
import sys
from typing import Any

import pytest
from harness.cores import CYTHON_CORE, core_params, needs_cython
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py
from fastlock.protocol.arguments import BAD_MAP_KEY, MAX_BULK_LENGTH, MAX_REPLY_ELEMENTS
from fastlock.protocol.replies import response_error
from fastlock.sync.connect import set_io_timeout

CORES = core_params(CYTHON_CORE, _core_py)

SHA = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"


class Color(enum.IntEnum):
    RED = 7


class Name(str):
    pass


class Ratio(float):
    pass


def bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


# (argument, exact bytes sent for it)
ARGUMENTS = [
    pytest.param(True, b"1", id="true"),
    pytest.param(False, b"0", id="false"),
    pytest.param(None, b"0", id="none"),
    pytest.param(0, b"0", id="zero"),
    pytest.param(-42, b"-42", id="negative"),
    pytest.param(2**63 - 1, b"9223372036854775807", id="int64-max"),
    pytest.param(-(2**63), b"-9223372036854775808", id="int64-min"),
    pytest.param(2**100, str(2**100).encode(), id="bigint"),
    pytest.param(-(2**70), str(-(2**70)).encode(), id="negative-bigint"),
    pytest.param(Color.RED, b"7", id="intenum"),
    pytest.param(1.5, b"1.5", id="float"),
    pytest.param(0.1, b"0.1", id="float-shortest"),
    pytest.param(1.0, b"1.0", id="float-integral"),
    pytest.param(1e20, b"1e+20", id="float-exponent"),
    pytest.param(-0.0, b"-0.0", id="negative-zero"),
    pytest.param(Ratio(2.5), b"2.5", id="float-subclass"),
    pytest.param("", b"", id="empty-str"),
    pytest.param("ascii", b"ascii", id="str"),
    pytest.param("h\u00e9\u4e2d\U0001f600", "h\u00e9\u4e2d\U0001f600".encode(), id="utf8"),
    pytest.param(Name("sub"), b"sub", id="str-subclass"),
    pytest.param(b"\x00\r\n\xff", b"\x00\r\n\xff", id="binary"),
    pytest.param(bytearray(b"ba"), b"ba", id="bytearray"),
    pytest.param(memoryview(b"mv"), b"mv", id="memoryview"),
    pytest.param(memoryview(b"abcdef")[1:4], b"bcd", id="memoryview-slice"),
    pytest.param(memoryview(bytes(range(8))).cast("i"), bytes(range(8)), id="memoryview-int-items"),
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("value", "expected"), ARGUMENTS)
def test_argument_bytes(core: Any, value: Any, expected: bytes) -> None:
    assert core.encode_command("SET", value) == b"*2\r\n" + bulk(b"SET") + bulk(expected)


@pytest.mark.parametrize("core", CORES)
def test_evalsha_layout(core: Any) -> None:
    payload = core.encode_evalsha(SHA, ["k1", b"k2", "{t}k3"], [1, "two", 3.5, None, True])
    expected = b"*11\r\n" + b"".join(
        bulk(part)
        for part in (b"EVALSHA", SHA.encode(), b"3", b"k1", b"k2", b"{t}k3", b"1", b"two", b"3.5", b"0", b"1")
    )
    assert payload == expected
    assert core.encode_evalsha(SHA, (), ()) == b"*3\r\n" + bulk(b"EVALSHA") + bulk(SHA.encode()) + bulk(b"0")
    assert core.encode_evalsha(SHA, iter(["a"]), (x for x in [1])) == core.encode_evalsha(SHA, ["a"], [1])


@pytest.mark.parametrize("core", CORES)
def test_pipeline_is_commands_back_to_back(core: Any) -> None:
    commands = [("SET", "a", 1), ("GET", "a"), ("SCRIPT", "LOAD", "return 1")]
    assert core.encode_pipeline(commands) == b"".join(core.encode_command(*c) for c in commands)


BAD_TYPES = [
    ([1], "list"),
    ({"a": 1}, "dict"),
    (object(), "object"),
    ({1}, "set"),
    (1j, "complex"),
    (bytes, "type"),
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("value", "type_name"), BAD_TYPES)
def test_unsupported_type_names_position_and_type(core: Any, value: Any, type_name: str) -> None:
    with pytest.raises(fastlock.ArgumentTypeError, match=rf"^argument 2: unsupported type '{type_name}'"):
        core.encode_command("SET", "k", value)
    with pytest.raises(TypeError, match=rf"^args\[1\]: unsupported type '{type_name}'"):
        core.encode_evalsha(SHA, ["k"], [1, value])
    with pytest.raises(TypeError, match=rf"^keys\[0\]: unsupported type '{type_name}'"):
        core.encode_evalsha(SHA, [value], [])
    with pytest.raises(TypeError, match=rf"^command 1 argument 1: unsupported type '{type_name}'"):
        core.encode_pipeline([("PING",), ("GET", value)])


BAD_VALUES = [
    pytest.param(math.nan, "float is not finite", id="nan"),
    pytest.param(math.inf, "float is not finite", id="inf"),
    pytest.param(-math.inf, "float is not finite", id="-inf"),
    pytest.param("bad \udc80 surrogate", "cannot be encoded as UTF-8", id="lone-surrogate"),
    pytest.param(memoryview(b"abcdef")[::2], "not C-contiguous", id="strided-memoryview"),
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("value", "reason"), BAD_VALUES)
def test_bad_values_are_value_errors(core: Any, value: Any, reason: str) -> None:
    with pytest.raises(fastlock.ArgumentError, match=rf"^args\[0\]: .*{reason}"):
        core.encode_evalsha(SHA, [], [value])
    with pytest.raises(ValueError):
        core.encode_command("SET", "k", value)


@pytest.mark.parametrize("core", CORES)
def test_argument_over_the_bulk_limit_is_refused(core: Any) -> None:
    huge = memoryview(bytearray(MAX_BULK_LENGTH + 1))
    with pytest.raises(fastlock.ArgumentError, match=r"^argument 2: 536870913 bytes is over"):
        core.encode_command("SET", "k", huge)


@pytest.mark.parametrize("core", CORES)
def test_empty_command_is_refused(core: Any) -> None:
    with pytest.raises(ValueError):
        core.encode_command()


# --- the reply reader --------------------------------------------------------------------
# The Cython core is hiredis's reader; the Python reader must return and raise the same.

REPLIES = [
    (b"+OK\r\n", b"OK"),
    (b":-12\r\n", -12),
    (b"$3\r\nabc\r\n", b"abc"),
    (b"$0\r\n\r\n", b""),
    (b"$-1\r\n", None),
    (b"*-1\r\n", None),
    (b"*0\r\n", []),
    (b"*3\r\n:1\r\n$1\r\nx\r\n*1\r\n+y\r\n", [1, b"x", [b"y"]]),
    (b"$4\r\na\r\nb\r\n", b"a\r\nb"),
    # RESP3, as hiredis returns it
    (b"%2\r\n+a\r\n:1\r\n$1\r\nb\r\n*1\r\n:2\r\n", {b"a": 1, b"b": [2]}),
    (b"%3\r\n+a\r\n:1\r\n+b\r\n:2\r\n+a\r\n:3\r\n", {b"a": None, b"b": 3}),  # hiredis's popitem
    (b"~2\r\n:1\r\n:1\r\n", [1, 1]),
    (b",1.5\r\n", 1.5),
    (b",-inf\r\n", -math.inf),
    (b",1e5\r\n", 100000.0),
    (b",.5\r\n", 0.5),
    (b"#t\r\n", True),
    (b"#f\r\n", False),
    (b"#\x00\r\n", False),
    (b"_\r\n", None),
    (b"(12345678901234567890123\r\n", b"12345678901234567890123"),
    (b"(-\r\n", b"-"),
    (b"=8\r\ntxt:abcd\r\n", b"abcd"),
    (b">2\r\n+message\r\n:1\r\n", [b"message", 1]),
    (b"|1\r\n+ttl\r\n:5\r\n", [b"ttl", 5]),  # an attribute is a reply of its own
    (b"%-1\r\n", None),
    (b"~-1\r\n", None),
    (b"=-1\r\n", None),
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("stream", "value"), REPLIES)
def test_reader_values(core: Any, stream: bytes, value: Any) -> None:
    reader = core.ReplyReader()
    reader.feed(stream)
    reply = reader.gets()
    assert reply == value
    assert type(reply) is type(value) or type(value) is list  # hiredis's push is a list subclass
    assert reader.gets() is core.NOT_ENOUGH
    assert not reader.has_data()


@pytest.mark.parametrize("core", CORES)
def test_reader_returns_typed_errors_and_keeps_nested_ones(core: Any) -> None:
    reader = core.ReplyReader()
    reader.feed(b"-NOSCRIPT No matching script. Please use EVAL.\r\n*2\r\n-WRONGTYPE bad\r\n:1\r\n")
    err = reader.gets()
    assert type(err) is fastlock.NoScriptError
    assert (err.code, err.message) == ("NOSCRIPT", "No matching script. Please use EVAL.")
    nested = reader.gets()
    assert type(nested[0]) is fastlock.WrongTypeError and nested[1] == 1


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    "text", ["MOVED \u00b2 127.0.0.1:6381", "ASK 12 h:\u0663", "MOVED 16384 h:1", "ASK 1 h:65536"]
)
def test_malformed_redirection_is_a_typed_error(core: Any, text: str) -> None:
    reader = core.ReplyReader()
    reader.feed(b"-" + text.encode() + b"\r\n")
    err = reader.gets()
    assert isinstance(err, fastlock.exceptions._RedirectError) and str(err) == text
    assert err.slot == -1 or err.port == 0


MALFORMED = [
    (b"?what\r\n", 'Protocol error, got "?" as reply type byte'),
    (b"!5\r\nERR x\r\n", 'Protocol error, got "!" as reply type byte'),
    (b"\x80", 'Protocol error, got "\\x80" as reply type byte'),
    (b"\r\n", 'Protocol error, got "\\r" as reply type byte'),
    (b"$-5\r\n", "Bulk string length out of range"),
    (b"*-7\r\n", "Multi-bulk length out of range"),
    (b"%-2\r\n", "Multi-bulk length out of range"),
    (b"$03\r\nabc\r\n", "Bad bulk string length"),
    (b"$-0\r\n", "Bad bulk string length"),
    (b"*+1\r\n:1\r\n", "Bad multi-bulk length"),
    (b":007\r\n", "Bad integer value"),
    (b":9223372036854775808\r\n", "Bad integer value"),
    (b":\xd9\xa3\r\n", "Bad integer value"),
    (b",1e-400\r\n", "Bad double value"),
    (b",+1\r\n", "Bad double value"),
    (b"," + b"1" * 326 + b"\r\n", "Double value is too large"),
    (b"#x\r\n", "Bad bool value"),
    (b"_x\r\n", "Bad nil value"),
    (b"(1.5\r\n", "Bad bignum value"),
    (b"+a\rb\r\n", "Bad simple string value"),
    (b"=3\r\nabc\r\n", "Verbatim string 4 bytes of content type are missing or incorrectly encoded."),
    (b"*2\r\n:1\r\n%1\r\n*0\r\n:1\r\n", BAD_MAP_KEY),
    (b"%1\r\n%0\r\n:1\r\n", BAD_MAP_KEY),
    # limits: refused at the header, before any payload is buffered or allocated
    (b"$4000000000\r\n", f"Reply bulk string length 4000000000 is over the limit of {MAX_BULK_LENGTH}"),
    (b"*4000000000\r\n", f"Reply aggregate length 4000000000 is over the limit of {MAX_REPLY_ELEMENTS}"),
    (b"%134217729\r\n", f"Reply aggregate length 134217729 is over the limit of {MAX_REPLY_ELEMENTS}"),
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("stream", "message"), MALFORMED)
def test_reader_refuses_malformed_replies(core: Any, stream: bytes, message: str) -> None:
    reader = core.ReplyReader()
    reader.feed(b"+before\r\n" + stream)
    assert reader.gets() == b"before"
    with pytest.raises(fastlock.ProtocolError) as caught:
        reader.gets()
    assert str(caught.value) == message
    reader.feed(b"+OK\r\n")
    with pytest.raises(fastlock.ProtocolError):  # the stream is lost for good
        reader.gets()


@pytest.mark.parametrize("core", CORES)
def test_reader_limits_are_configurable_and_exact(core: Any) -> None:
    def outcome(stream: bytes) -> Any:
        reader = core.ReplyReader(max_length=5, max_elements=2)
        reader.feed(stream)
        try:
            return reader.gets()
        except fastlock.ProtocolError as exc:
            return str(exc)

    assert outcome(b"$5\r\nabcde\r\n") == b"abcde"
    assert outcome(b"$6\r\n") == "Reply bulk string length 6 is over the limit of 5"
    assert outcome(b"+abcde\r\n") == b"abcde"
    assert outcome(b"+abcdef\r\n") == "Reply line is over the limit of 5"
    assert outcome(b"+abcdef\r") == "Reply line is over the limit of 5"  # no end needed
    assert outcome(b"+abcdef") is core.NOT_ENOUGH
    assert outcome(b"*2\r\n:1\r\n:2\r\n") == [1, 2]
    assert outcome(b"*3\r\n") == "Reply aggregate length 3 is over the limit of 2"
    assert outcome(b"%3\r\n") == "Reply aggregate length 3 is over the limit of 2"


@pytest.mark.parametrize("core", CORES)
def test_reader_nests_1024_deep_without_recursion(core: Any) -> None:
    reader = core.ReplyReader()
    for _ in range(1024):
        reader.feed(b"*2\r\n:1\r\n")
    reader.feed(b":7\r\n")
    reply = reader.gets()
    for _ in range(1024):
        assert type(reply) is list and reply[0] == 1 and len(reply) == 2
        reply = reply[1]
    assert reply == 7
    reader.feed(b"*1\r\n" * 1024 + b"*")  # hiredis's limit, REDIS_READER_MAX_REPLY_DEPTH
    with pytest.raises(fastlock.ProtocolError, match=r"^Max nesting depth exceeded$"):
        reader.gets()


def test_python_reader_work_is_linear() -> None:
    """Deterministic work count (Python and C calls, via sys.setprofile): 10x the elements
    cost at most about 10x, and cutting one reply into many feeds adds only a constant per
    feed, never a re-parse of what came before."""

    def calls(count: int, feeds: int) -> int:
        stream = b"*%d\r\n" % count + b"$10\r\n0123456789\r\n" * count
        step = -(-len(stream) // feeds)
        chunks = [stream[i : i + step] for i in range(0, len(stream), step)]
        reader = _core_py.ReplyReader()
        seen = 0

        def profile(frame: Any, event: str, arg: Any) -> None:
            nonlocal seen
            seen += event in ("call", "c_call")

        sys.setprofile(profile)
        try:
            for chunk in chunks:
                reader.feed(chunk)
                reply = reader.gets()
        finally:
            sys.setprofile(None)
        assert len(reply) == count
        return seen

    small, large = calls(2_000, 1), calls(20_000, 1)
    assert large <= 10.5 * small
    assert calls(20_000, 200) <= large + 200 * 40


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"$4000000000\r\n", "bulk string length 4000000000"),
        (b"*4000000000\r\n", "aggregate length 4000000000"),
        (b"%1\r\n*1\r\n", "Bad map key"),
    ],
)
def test_connection_drops_a_refused_reply(core: Any, reply: bytes, message: str) -> None:
    ours, server = socket.socketpair()
    set_io_timeout(ours, 5.0)
    conn = core.Connection(ours)
    try:
        server.sendall(reply)  # the reply arrives before the command is even read
        with pytest.raises(fastlock.ProtocolError, match=message):
            conn.execute(("GET", "k"))
        assert conn.broken
        with pytest.raises(fastlock.ConnectionError):
            conn.execute(("PING",))
    finally:
        conn.close()
        server.close()


@pytest.mark.parametrize(
    ("text", "cls", "code"),
    [
        ("ERR unknown command 'X'", fastlock.ResponseError, "ERR"),
        ("BUSY Redis is busy running a script.", fastlock.BusyError, "BUSY"),
        ("MOVED 3999 127.0.0.1:6381", fastlock.MovedError, "MOVED"),
        ("READONLY You can't write against a read only replica.", fastlock.ReadOnlyError, "READONLY"),
        ("LOADING Redis is loading the dataset in memory", fastlock.LoadingError, "LOADING"),
        ("NOSCRIPT boom script: 6b33, on @user_script:1.", fastlock.LuaRaisedError, "NOSCRIPT"),
        ("BUSY fake script: 6b33, on @user_script:3.", fastlock.LuaRaisedError, "BUSY"),
        (
            "ERR Error running script (call to f_6b33): @user_script:1: user_script:1: boom",
            fastlock.LuaRaisedError,
            "ERR",
        ),
        ("no such key", fastlock.ResponseError, ""),
    ],
)
def test_error_classification_is_by_server_code_word(text: str, cls: type, code: str) -> None:
    err = response_error(text)
    assert type(err) is cls and err.code == code and str(err) == text
    if isinstance(err, fastlock.MovedError):
        assert (err.slot, err.host, err.port) == (3999, "127.0.0.1", 6381)


# --- Cython and Python agree, byte for byte ---------------------------------------------

scalars = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.binary(),
    st.binary().map(bytearray),
    st.binary().map(memoryview),
    st.lists(st.integers(), max_size=2),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
)


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return (type(exc), str(exc))


@needs_cython
@settings(max_examples=300, deadline=None)
@given(st.lists(scalars, max_size=8), st.lists(scalars, max_size=8))
def test_encoders_agree(keys: list[Any], args: list[Any]) -> None:
    assert outcome(CYTHON_CORE.encode_evalsha, SHA, keys, args) == outcome(
        _core_py.encode_evalsha, SHA, keys, args
    )
    command = ("CMD", *keys, *args)
    assert outcome(CYTHON_CORE.encode_command, *command) == outcome(_core_py.encode_command, *command)


def float_bytes(core: Any, value: float) -> bytes:
    """The bytes ``core`` sends for ``value``."""
    count, length, data, end = core.encode_command(value).split(b"\r\n")
    assert (count, length, end) == (b"*1", b"$%d" % len(data), b"")
    return bytes(data)


def near(value: float) -> list[float]:
    return [value, math.nextafter(value, -math.inf), math.nextafter(value, math.inf)]


# The Cython writer prints floats of at most 15 significant digits (1e-4 <= |x| < 1e15) itself
# and leaves the rest to CPython: every float below, on either side of that line, is repr().
FLOAT_EDGES = [
    *(x for k in range(-6, 18) for base in (10.0**k, 5 * 10.0**k, 9.5 * 10.0**k) for x in near(base)),
    *near(123456789012345.0),
    *near(999999999999999.9),
    *near(0.000123456789012345),
    0.1 + 0.2,
    1 / 3,
    2.0**53,
    2.0**-1074,
    sys.float_info.max,
    sys.float_info.min,
]
short_decimals = st.builds(
    lambda digits, scale, negative: (-1) ** negative * digits / 10**scale,
    st.integers(min_value=0, max_value=10**15),
    st.integers(min_value=0, max_value=19),
    st.booleans(),
)


@pytest.mark.parametrize("core", CORES)
def test_float_edges_are_repr(core: Any) -> None:
    for value in FLOAT_EDGES:
        for signed in (value, -value):
            assert float_bytes(core, signed) == repr(signed).encode(), signed


@pytest.mark.parametrize("core", CORES)
@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.floats(allow_nan=False, allow_infinity=False), short_decimals))
def test_floats_are_repr(core: Any, value: float) -> None:
    assert float_bytes(core, value) == repr(value).encode()


line = st.binary(max_size=20).map(lambda text: text.replace(b"\r", b"").replace(b"\n", b""))
resp_scalars = st.one_of(
    st.binary().map(lambda b: b"$%d\r\n%s\r\n" % (len(b), b)),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda i: b":%d\r\n" % i),
    line.map(lambda text: b"+" + text + b"\r\n"),
    line.map(lambda text: b"-" + text + b"\r\n"),
    st.sampled_from([b"MOVED 12 h:1", b"MOVED \xc2\xb2 h:1", b"ASK 1 h:\xd9\xa3", b"BUSY x"]).map(
        lambda text: b"-" + text + b"\r\n"
    ),
    st.sampled_from(b"$-1 *-1 *0 _ %-1 ~-1 >-1 |-1 =-1 %0 ~0 #t #f #T #\x00".split(b" ")).map(
        lambda text: text + b"\r\n"
    ),
    st.floats().map(lambda f: b",%s\r\n" % repr(f).encode()),
    st.sampled_from([b"inf", b"-INF", b"nan", b"-nan", b"1E5", b".5", b"5.", b"-0", b"007.50"]).map(
        lambda text: b"," + text + b"\r\n"
    ),
    st.integers().map(lambda i: b"(%d\r\n" % i),
    st.binary().map(lambda b: b"=%d\r\ntxt:%s\r\n" % (len(b) + 4, b)),
)


def resp_aggregates(children: Any) -> Any:
    items = st.lists(children, max_size=4)
    pairs = st.lists(st.tuples(resp_scalars, children), max_size=3)
    return st.one_of(
        st.tuples(st.sampled_from(b"*~>"), items).map(
            lambda t: b"%c%d\r\n" % (t[0], len(t[1])) + b"".join(t[1])
        ),
        st.tuples(st.sampled_from(b"%|"), pairs).map(
            lambda t: b"%c%d\r\n" % (t[0], len(t[1])) + b"".join(k + v for k, v in t[1])
        ),
    )


resp_values = st.recursive(resp_scalars, resp_aggregates, max_leaves=12)
bad_items = st.sampled_from([*(stream for stream, _ in MALFORMED), b"\r\n", b"$", b"*1", b"*1\r\n" * 1025])


@st.composite
def malformed_streams(draw: Any) -> bytes:
    stream = b"".join(draw(st.lists(resp_values, min_size=1, max_size=3)))
    at = draw(st.integers(min_value=0, max_value=len(stream)))
    junk = draw(st.one_of(bad_items, st.binary(min_size=1, max_size=3)))
    return stream[:at] + junk + stream[at + draw(st.integers(min_value=0, max_value=2)) :]


limits = st.fixed_dictionaries(
    {},
    optional={
        "max_length": st.sampled_from([0, 3, 16, MAX_BULK_LENGTH]),
        "max_elements": st.sampled_from([0, 2, MAX_REPLY_ELEMENTS]),
    },
)


def normalise(value: Any) -> Any:
    if isinstance(value, dict):  # as pairs: error keys are distinct objects, NaN != NaN
        return ("map", [(normalise(k), normalise(v)) for k, v in value.items()])
    if isinstance(value, list):  # a push's type kept: hiredis.PushNotification from every reader
        items = [normalise(v) for v in value]
        return items if type(value) is list else (type(value), items)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, fastlock.ResponseError):
        return (type(value), str(value), getattr(value, "slot", None), getattr(value, "port", None))
    return (type(value), value)


def read_all(core: Any, stream: bytes, cuts: list[int], **limits: int) -> list[Any]:
    """Every reply, ``has_data()`` after each feed, and the error that ends the stream."""
    reader = core.ReplyReader(**limits)
    replies, start = [], 0
    try:
        for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
            if cut > start:
                reader.feed(stream, start, cut - start)
                start = cut
            while (reply := reader.gets()) is not core.NOT_ENOUGH:
                replies.append(normalise(reply))
            replies.append(("has_data", reader.has_data()))
    except fastlock.ProtocolError as exc:
        replies.append((type(exc), str(exc)))
    return replies


cuts = st.lists(st.integers(min_value=0), max_size=6)


def strip(outcomes: list[Any]) -> list[Any]:
    return [outcome for outcome in outcomes if outcome not in (("has_data", False), ("has_data", True))]


@needs_cython
@settings(max_examples=400, deadline=None)
@given(st.lists(resp_values, min_size=1, max_size=5), cuts)
def test_readers_agree_on_split_streams(values: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(values)
    expected = read_all(CYTHON_CORE, stream, cuts)
    assert expected == read_all(_core_py, stream, cuts)
    assert ("has_data", True) not in expected[-1:]  # valid streams are read to the end
    assert strip(read_all(_core_py, stream, [])) == strip(expected)


@needs_cython
@settings(max_examples=600, deadline=None)
@given(malformed_streams(), cuts, limits)
def test_readers_agree_on_malformed_streams(stream: bytes, cuts: list[int], limits: dict[str, int]) -> None:
    assert read_all(CYTHON_CORE, stream, cuts, **limits) == read_all(_core_py, stream, cuts, **limits)


@needs_cython
@settings(max_examples=300, deadline=None)
@given(st.lists(resp_values, min_size=1, max_size=3), cuts, limits)
def test_readers_agree_on_limits(values: list[bytes], cuts: list[int], limits: dict[str, int]) -> None:
    stream = b"".join(values)
    assert read_all(CYTHON_CORE, stream, cuts, **limits) == read_all(_core_py, stream, cuts, **limits)


# --- the Cython reader's own parser of the common replies ------------------------------
# While hiredis holds nothing, the Cython reader parses integers, bulk and simple strings,
# nulls and arrays of them itself: the same values as hiredis's own reader and the Python
# reader, whatever the cuts, the replies it leaves to hiredis in between, the nesting (deeper
# than it goes) or the limits.

common_scalars = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda i: b":%d\r\n" % i),
    st.sampled_from([10**17, 10**18 - 1, 10**18, -(10**18) + 1, -(10**18)]).map(lambda i: b":%d\r\n" % i),
    st.binary(max_size=40).map(lambda b: b"$%d\r\n%s\r\n" % (len(b), b)),
    line.map(lambda text: b"+" + text + b"\r\n"),
    st.sampled_from([b"$-1\r\n", b"*-1\r\n", b"*0\r\n", b"+\r\n", b"$0\r\n\r\n", b":0\r\n"]),
)
left_to_hiredis = st.sampled_from(
    [
        b"-ERR x\r\n",
        b"_\r\n",
        b"#t\r\n",
        b",1.5\r\n",
        b"%1\r\n+a\r\n:1\r\n",
        b"~1\r\n:1\r\n",
        b"$3\r\nabcXY",
        b"+a\rb\r\n",
    ]
)
common_values = st.recursive(
    st.one_of(common_scalars, left_to_hiredis),
    lambda children: st.lists(children, max_size=4).map(
        lambda items: b"*%d\r\n" % len(items) + b"".join(items)
    ),
    max_leaves=20,
)
deep_values = st.tuples(st.integers(min_value=1, max_value=12), common_scalars).map(
    lambda t: b"*1\r\n" * t[0] + t[1]
)


class _Hiredis:
    """hiredis's own reader, configured as the Cython core configures it, for ``read_all``."""

    NOT_ENOUGH = object()

    @classmethod
    def ReplyReader(cls) -> Any:  # read_all calls it so
        import hiredis

        return hiredis.Reader(
            protocolError=fastlock.ProtocolError, replyError=response_error, notEnoughData=cls.NOT_ENOUGH
        )


@needs_cython
@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(common_values, deep_values), min_size=1, max_size=8), cuts)
def test_common_replies_read_as_hiredis_reads_them(values: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(values)
    expected = read_all(CYTHON_CORE, stream, cuts)
    assert strip(expected) == strip(read_all(_Hiredis, stream, cuts))
    assert expected == read_all(_core_py, stream, cuts)


@needs_cython
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(common_values, deep_values), min_size=1, max_size=4), cuts, limits)
def test_common_replies_keep_the_limits(values: list[bytes], cuts: list[int], limits: dict[str, int]) -> None:
    stream = b"".join(values)
    assert read_all(CYTHON_CORE, stream, cuts, **limits) == read_all(_core_py, stream, cuts, **limits)


@pytest.mark.parametrize("core", CORES)
def test_a_bulk_string_is_read_by_its_length(core: Any) -> None:
    """hiredis does not check the two bytes after a bulk string's payload: neither reader does."""
    reader = core.ReplyReader()
    reader.feed(b"$3\r\nabcXY:1\r\n*1\r\n$1\r\nzAB")
    assert [reader.gets(), reader.gets(), reader.gets()] == [b"abc", 1, [b"z"]]
    assert not reader.has_data()
