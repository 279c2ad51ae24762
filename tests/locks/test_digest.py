"""Digests are documented and stable: golden values pin the canonical form and the hash."""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
from harness.cores import CYTHON_CORE, needs_cython
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock import _core_py
from fastlock._impl import Core
from fastlock.digest import _HEX, Digester, canonical, check_digest, encode_value
from fastlock.locks.keys import bucket_of


def test_canonical_form_is_sorted_compact_utf8_json() -> None:
    assert (
        canonical("report", "default", {"b": 1, "a": [1, "é"]})
        == '["report","default",{"a":[1,"é"],"b":1}]'.encode()
    )
    assert canonical("report") == b'["report",null,null]'
    assert canonical("r", None, (1, 2)) == canonical("r", None, [1, 2])


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


def _json_of(name: str, queue: str | None, args: Any) -> bytes:
    """The documented canonical form, spelled with json.dumps."""
    return json.dumps(
        [name, queue, args],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=encode_value,
    ).encode()


def _json(args: Any) -> bytes:
    return _json_of("n", "q", args)


def _outcome(encode: Any, args: Any) -> Any:
    try:
        return encode(args)
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc), str(exc)


ENCODERS = [
    pytest.param("core", id="cython-core", marks=needs_cython),  # domain_digest.pxi, then json's C encoder
    pytest.param("json-c", id="c-encoder"),
    pytest.param("json", id="public-encoder"),
]


def _use(encoder: str, monkeypatch: pytest.MonkeyPatch) -> Core:
    """The core that makes :func:`canonical` use ``encoder`` and what follows it."""
    if encoder == "json":
        monkeypatch.setattr(fastlock.digest, "_ENCODE", None)
    return CYTHON_CORE if encoder == "core" else _core_py  # type: ignore[return-value]


@pytest.mark.parametrize("encoder", ENCODERS)
def test_canonical_form_is_json_dumps_for_any_value(encoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    core = _use(encoder, monkeypatch)
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    values = [
        None, True, 0, -(10**30), 1.5, 1e100, "a\"\\\n\x00\u2028é", Text("t"), Color.RED, [], {}, (),
        [1, "x", None, False], {"b": [1, {"d": 2, "c": (3,)}], "a": 1.25}, {2: "x", 1: "y"},
        float("nan"), [float("inf")], {"a": object()}, {1: 1, "a": 2}, cyclic,
        date(2026, 12, 1), {"at": datetime(2026, 12, 1, 4, 5, tzinfo=UTC)}, [time(4, 5, 6, 7)],
        Decimal("1.10"), uuid.UUID(int=7), {1, 2}, b"bytes", timedelta(1),
    ]  # fmt: skip
    for args in values:
        assert _outcome(lambda a: canonical("n", "q", a, core), args) == _outcome(_json, args), args


_TEXT = st.text(st.characters(exclude_categories=()))  # control characters and lone surrogates too
_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70) | st.floats() | _TEXT
    | st.builds(Text, _TEXT) | st.sampled_from([Color.RED, date(2026, 12, 1), Decimal("1.10"), b"x"])
)  # fmt: skip
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_TEXT, inner, max_size=4)
        | st.dictionaries(st.integers(0, 3) | _TEXT, inner, max_size=3)
    ),
    max_leaves=12,
)


@needs_cython
@settings(max_examples=800, deadline=None)
@given(name=_TEXT, queue=st.none() | _TEXT, args=_VALUES)
def test_the_core_encoder_writes_json_s_bytes_or_leaves_the_value_to_json(
    name: str, queue: str | None, args: Any
) -> None:
    """``_core._canonical_json`` (_coreparts/domain_digest.pxi) gives the json encoder's exact bytes, or None
    (then json gives its bytes or its error); never other bytes, never an error of its own."""
    fast = CYTHON_CORE._canonical_json(name, queue, args)  # type: ignore[union-attr]
    expected = _outcome(lambda a: _json_of(name, queue, a), args)
    assert fast is None or fast == expected
    assert _outcome(lambda a: canonical(name, queue, a, CYTHON_CORE), args) == expected  # type: ignore[arg-type]


@needs_cython
def test_the_core_encoder_covers_the_common_values() -> None:
    """It is the fast path only if it handles the usual arguments itself."""
    value = [1, -(2**63), 2**64, 2.5, "é\n", None, True, (1,), {"b": [], "a": {}}]
    assert CYTHON_CORE._canonical_json("job", None, value) == _json_of("job", None, value)
    deep: list[Any] = []
    for _ in range(40):
        deep = [deep]
    assert CYTHON_CORE._canonical_json("job", None, deep) is None  # left to json: 33 deep and more
    assert canonical("job", None, deep) == _json_of("job", None, deep)


def test_dates_decimals_and_uuids_digest_as_their_text() -> None:
    """A ``date`` argument used to fail digesting; these types now encode as their text, so a
    framework that sends a datetime to its worker as ISO text keeps the digest."""
    when = datetime(2026, 12, 1, 4, 5, 6, tzinfo=UTC)
    value = [date(2026, 12, 1), when, time(4, 5), Decimal("1.10"), uuid.UUID(int=1)]
    text = ["2026-12-01", "2026-12-01T04:05:06+00:00", "04:05:00", "1.10", str(uuid.UUID(int=1))]
    assert canonical("n", None, value) == canonical("n", None, text)
    digester = Digester()
    assert digester.digest("report", "q", {"day": date(2026, 12, 1)}) == digester.digest(
        "report", "q", {"day": "2026-12-01"}
    )
    assert digester.digest("r", None, [when]) != digester.digest("r", None, [when.replace(tzinfo=None)])
    for refused in ({1}, b"x", timedelta(1), object()):
        with pytest.raises(TypeError, match="not JSON serializable"):
            canonical("n", None, [refused])


def test_golden_digests() -> None:
    assert Digester().digest("report", "default", {"b": 1, "a": [1, "é"]}) == (
        "9b34ddf1eb09c160fb85ded7023b7c6029ba204b5e351509705d40dfb5c81512"
    )
    assert Digester("md5").digest("report") == "ea9d2c3fc17ece9c2f2aec842d0cb61c"


def test_queue_and_args_change_the_digest_key_order_does_not() -> None:
    digester = Digester("sha3_256")
    base = digester.digest("job", "q", {"x": 1, "y": 2})
    assert base == digester.digest("job", "q", {"y": 2, "x": 1})
    assert (
        len({base, digester.digest("job", None, {"x": 1, "y": 2}), digester.digest("job", "q", {"x": 2})})
        == 3
    )


def test_custom_hash_and_errors() -> None:
    assert Digester(lambda data: hashlib.blake2b(data, digest_size=16).hexdigest()).digest("a") == (
        hashlib.blake2b(b'["a",null,null]', digest_size=16).hexdigest()
    )
    with pytest.raises(ValueError):
        Digester("no-such-hash")
    with pytest.raises(ValueError):
        Digester(lambda data: "NOT-HEX").digest("a")
    with pytest.raises(ValueError):
        Digester().digest("a", None, float("nan"))


def test_manager_digest_and_bucket() -> None:
    client = fastlock.Client("redis://127.0.0.1:1")  # no connection is made
    locks = fastlock.LockManager(client, hash="md5", buckets=16, prefix="p")
    lock = locks.lock("report", ttl=None)
    assert lock.digest == "ea9d2c3fc17ece9c2f2aec842d0cb61c"
    assert locks.bucket(lock.digest) == 0xEA9D2C3F % 16
    assert locks.bucket_keys(locks.bucket(lock.digest)) == ("p:{15}:idx", "p:{15}:seq", "p:{15}:log")
    assert fastlock.LockManager(client, prefix="app:{t}").bucket_keys(3) == (
        "app:{t}:3:idx",
        "app:{t}:3:seq",
        "app:{t}:3:log",
    )


_DIGESTS = st.text("0123456789abcdefABCDEFxé ", min_size=0, max_size=140) | st.text(max_size=12)


@needs_cython
@settings(max_examples=500, deadline=None)
@given(value=_DIGESTS | st.binary(max_size=12) | st.integers() | st.none())
def test_the_core_digest_test_is_the_regular_expression_s(value: Any) -> None:
    """``_core._is_digest`` says what ``check_digest``'s regular expression says of a str, and
    False for anything else: check_digest returns or raises as it does without it."""
    expected = isinstance(value, str) and _HEX.fullmatch(value) is not None
    assert CYTHON_CORE._is_digest(value) is expected  # type: ignore[union-attr]
    with_core = _outcome(lambda v: check_digest(v, CYTHON_CORE), value)  # type: ignore[arg-type]
    assert with_core == _outcome(lambda v: check_digest(v, _core_py), value)


@needs_cython
@settings(max_examples=500, deadline=None)
@given(digest=_DIGESTS, buckets=st.integers(1, 65536) | st.integers(-3, 0))
def test_the_core_bucket_is_bucket_of(digest: str, buckets: int) -> None:
    """``_core._digest_bucket`` gives ``int(digest[:8], 16) % buckets``, or the same error."""
    core = CYTHON_CORE._digest_bucket  # type: ignore[union-attr]
    assert _outcome(lambda d: core(d, buckets), digest) == _outcome(lambda d: bucket_of(d, buckets), digest)
