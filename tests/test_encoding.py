"""The RESP writer and reply reader of both cores: exact bytes, exact errors, no drift."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest
from harness.cores import CYTHON_CORE, core_params, needs_cython
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py
from fastlock._arguments import MAX_BULK_LENGTH

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
]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(("stream", "value"), REPLIES)
def test_reader_values(core: Any, stream: bytes, value: Any) -> None:
    reader = core.ReplyReader()
    reader.feed(stream)
    assert reader.gets() == value
    assert reader.gets() is False


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
def test_reader_rejects_garbage(core: Any) -> None:
    reader = core.ReplyReader()
    reader.feed(b"?what\r\n")
    with pytest.raises(fastlock.ProtocolError):
        reader.gets()


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
    err = fastlock.exceptions.response_error(text)
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


line = st.binary(max_size=20).map(lambda text: text.replace(b"\r", b"").replace(b"\n", b""))
resp_values = st.recursive(
    st.one_of(
        st.binary().map(lambda b: b"$%d\r\n%s\r\n" % (len(b), b)),
        st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda i: b":%d\r\n" % i),
        line.map(lambda text: b"+" + text + b"\r\n"),
        line.map(lambda text: b"-" + text + b"\r\n"),
        st.sampled_from([b"$-1\r\n", b"*-1\r\n", b"*0\r\n"]),
    ),
    lambda children: st.lists(children, max_size=4).map(lambda xs: b"*%d\r\n" % len(xs) + b"".join(xs)),
    max_leaves=12,
)


def normalise(value: Any) -> Any:
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, fastlock.ResponseError):
        return (type(value), str(value))
    return value


def read_all(core: Any, stream: bytes, cuts: list[int]) -> list[Any]:
    reader = core.ReplyReader()
    replies, start = [], 0
    for cut in [*sorted(c % (len(stream) + 1) for c in cuts), len(stream)]:
        if cut > start:
            reader.feed(stream, start, cut - start)
            start = cut
        while (reply := reader.gets()) is not False:
            replies.append(normalise(reply))
    return replies


@needs_cython
@settings(max_examples=300, deadline=None)
@given(st.lists(resp_values, min_size=1, max_size=5), st.lists(st.integers(min_value=0), max_size=6))
def test_readers_agree_on_split_streams(values: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(values)
    assert (
        read_all(CYTHON_CORE, stream, cuts)
        == read_all(_core_py, stream, [])
        == read_all(_core_py, stream, cuts)
    )
