"""The managers' locks: the Cython core's ``_lock_new`` (_coreparts/domain_new.pxi) builds the lock that
``Lock(...)`` builds (every slot alike), or hands the options to it (the same error)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from harness.cores import CYTHON_CORE, CYTHON_MISSING, needs_cython
from hypothesis import given, settings
from hypothesis import strategies as st

import fastlock
from fastlock._core_py import _lock_new
from fastlock.aio.locks import AsyncLock, AsyncLockManager
from fastlock.locks import base
from fastlock.locks.base import LockBase
from fastlock.locks.types import TTL_REQUIRED, LockType

CLIENT = fastlock.Client("redis://127.0.0.1:1")  # never connected: building a lock sends nothing
MANAGER = fastlock.LockManager(CLIENT)
DIGEST = "0123456789abcdef"
_UNSET = object()
if CYTHON_CORE is not None:  # told the vocabulary even when FASTLOCK_IMPL=python left it untold
    CYTHON_CORE._lock_spec(*base._SPEC)
    new_lock = CYTHON_CORE._lock_new

common_durations = (
    st.none() | st.floats(0.0, 1e9) | st.integers(0, 10**9) | st.sampled_from([0.0015, 0.0025, 12.5e-3])
)
durations = common_durations | (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([-0.0, 1e-4, 1e9 + 1, 10**9 + 1, 2**63, -1, True, False, "5", 1j])
)
options = st.fixed_dictionaries(  # each option: the common values (the core's) first, then any
    {
        "kind": st.sampled_from(
            [*LockType, *(kind.value for kind in LockType), "until_completed", "while_busy"]
        )
        | st.sampled_from(["nope", None, 3]),
        "ttl": durations | st.just(TTL_REQUIRED),  # no ttl given: refused alike
        "timeout": durations,
        "limit": st.integers(1, 1000) | st.integers(-1, 1002) | st.sampled_from([True, 2.0, "2", None]),
        "job_id": st.sampled_from([None, "job"]) | st.sampled_from(["", 7, b"job"]),
        "on_conflict": st.none() | st.sampled_from(["reject", "raise", "nope", {"enqueue": "reject"}]),
    }
)


def slots(lock: LockBase[Any]) -> list[tuple[str, Any]]:
    """Every slot's value and type (unset: a marker; a NaN alike to itself)."""
    found = []
    for cls in type(lock).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            value = getattr(lock, slot, _UNSET)
            same = "nan" if type(value) is float and math.isnan(value) else value
            found.append((slot, type(value), same))
    return found


def outcome(build: Any, cls: type[LockBase[Any]], manager: Any, values: dict[str, Any]) -> Any:
    try:
        lock = build(cls, manager, DIGEST, "job", *values.values())
    except Exception as exc:  # noqa: BLE001 - compared
        return type(exc), str(exc)
    return type(lock), slots(lock)


@needs_cython
@settings(max_examples=1500, deadline=None)
@given(values=options)
def test_the_core_builds_the_lock_the_class_builds(values: dict[str, Any]) -> None:
    assert outcome(new_lock, fastlock.Lock, MANAGER, values) == outcome(
        _lock_new, fastlock.Lock, MANAGER, values
    )


@needs_cython
@settings(max_examples=1000, deadline=None)
@given(
    kind=st.sampled_from([*LockType, "until_completed"]),
    ttl=common_durations | st.sampled_from([0.0005, 0.0045, 2.5e-3, 1.0005, 0.1235]),
    timeout=common_durations,
    limit=st.integers(1, 1000),
    job_id=st.sampled_from([None, "job"]),
)
def test_the_core_builds_the_common_locks_as_the_class(
    kind: Any, ttl: Any, timeout: Any, limit: int, job_id: str | None
) -> None:
    """The common options (each of them the core's to set), the ttl's rounding to even included."""
    values = {
        "kind": kind,
        "ttl": ttl,
        "timeout": timeout,
        "limit": limit,
        "job_id": job_id,
        "on_conflict": None,
    }
    assert outcome(new_lock, fastlock.Lock, MANAGER, values) == outcome(
        _lock_new, fastlock.Lock, MANAGER, values
    )


@needs_cython
def test_the_core_builds_each_transports_lock() -> None:
    manager = AsyncLockManager(fastlock.aio.Client("redis://127.0.0.1:1"))
    values = {
        "kind": "until_executed",
        "ttl": 5,
        "timeout": 0.0,
        "limit": 2,
        "job_id": "j",
        "on_conflict": None,
    }
    built = new_lock(AsyncLock, manager, DIGEST, "job", *values.values())
    assert type(built) is AsyncLock and built._call == manager.call
    assert outcome(new_lock, AsyncLock, manager, values) == outcome(_lock_new, AsyncLock, manager, values)
    assert outcome(new_lock, fastlock.Lock, MANAGER, values) == outcome(
        _lock_new, fastlock.Lock, MANAGER, values
    )


def test_the_managers_pass_their_options_to_the_lock() -> None:
    lock = MANAGER.lock("job", args=[1], type="until_completed", ttl=2.5, timeout=1, limit=3, job_id="j")
    assert (lock.type, lock.ttl, lock._ttl_ms, lock.timeout, lock.limit, lock.job_id) == (
        LockType.UNTIL_EXECUTED,
        2.5,
        2500,
        1,
        3,
        "j",
    )
    assert lock.digest == MANAGER.digest("job", None, [1]) and lock.name == "job"
    with pytest.raises(TypeError, match="bogus"):
        MANAGER.lock("job", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(fastlock.ArgumentError, match="needs a ttl"):
        MANAGER.lock("job", type="until_expired", ttl=None)
    with pytest.raises(fastlock.ArgumentError, match="ttl=None"):
        MANAGER.lock("job")


def test_the_options_are_declared_alike() -> None:
    """``LockOptions`` (the typing of ``client.lock`` and the integrations) names exactly the
    options of ``LockBase`` and of the managers' ``lock`` (kept as keyword parameters: the
    build's hot path; ``renew``, :class:`RenewOption`, through their ``**more``)."""
    import inspect

    from fastlock.locks.options import LockOptions, RenewOption

    names = LockOptions.__required_keys__ | LockOptions.__optional_keys__
    assert set(LockBase.__init__.__kwdefaults__) == names
    for lock in (fastlock.LockManager.lock, AsyncLockManager.lock):
        keywords = [p.name for p in inspect.signature(lock).parameters.values() if p.kind is p.KEYWORD_ONLY]
        assert set(keywords) - {"digest", "queue", "args"} == names - RenewOption.__optional_keys__, lock
        assert "RenewOption" in str(inspect.signature(lock).parameters["more"].annotation), lock
        assert lock.__kwdefaults__["ttl"] is TTL_REQUIRED


# --- the managers' lock in C (_manager_lock: its keywords read in C, a common call's lock
# built without a Python frame, any other call handed to the method) --------------------------

ASYNC_MANAGER = AsyncLockManager(fastlock.aio.Client("redis://127.0.0.1:1"))
BAD_DIGEST = "0123456789ABCDEF"
keywords = st.fixed_dictionaries(
    {},
    optional={
        "digest": st.sampled_from([None, DIGEST, "ab" * 32, BAD_DIGEST, "abc", 5]),
        "queue": st.sampled_from([None, "default", "", 3, b"q"]),
        "args": st.sampled_from([None, [1, "two", 3.5], {"b": 1, "a": [True, None]}, (), [math.nan], [{1}]]),
        "type": st.sampled_from([LockType.UNTIL_EXECUTED, "while_executing", "until_completed", "x", None]),
        "ttl": st.sampled_from([None, 5, 2.5, 0.0015, 0, -1, "5", TTL_REQUIRED]),
        "timeout": st.sampled_from([0.0, 1, 2.5, -1, None]),
        "limit": st.sampled_from([1, 3, 0, True, "2"]),
        "job_id": st.sampled_from([None, "job", "", 7]),
        "on_conflict": st.sampled_from([None, "reject", "nope"]),
        "renew": st.sampled_from([True, False, "yes"]),
        "ttll": st.just(5),
    },
)


def built(build: Any, *name: Any, **given: Any) -> Any:
    try:
        lock = build(*name, **given)
    except Exception as exc:  # noqa: BLE001 - compared
        return type(exc), str(exc)
    return type(lock), slots(lock)


@needs_cython
@settings(max_examples=1500, deadline=None)
@given(name=st.sampled_from([(), ("job",), (None,), ("",), ("é" * 3,), (3,)]), given=keywords)
def test_the_core_builds_the_managers_lock(name: tuple[Any, ...], given: dict[str, Any]) -> None:
    """A manager's ``lock`` in C gives the method's lock (every slot alike) or its error, for
    the calls it answers itself and those it hands to the method, on each transport."""
    for manager, method, cls in (
        (MANAGER, fastlock.LockManager.lock, fastlock.Lock),
        (ASYNC_MANAGER, AsyncLockManager.lock, AsyncLock),
    ):
        core_lock = CYTHON_CORE._manager_lock(manager, method, cls, manager.digester.constructor)
        assert built(core_lock, *name, **given) == built(method, manager, *name, **given)


@needs_cython
def test_the_core_lock_has_the_methods_signature() -> None:
    import inspect

    for manager, method in ((MANAGER, fastlock.LockManager.lock), (ASYNC_MANAGER, AsyncLockManager.lock)):
        core_lock = CYTHON_CORE._manager_lock(manager, method, fastlock.Lock, None)
        parameters = list(inspect.signature(method).parameters.values())[1:]  # without self
        assert [(p.name, p.kind, p.default) for p in inspect.signature(core_lock).parameters.values()] == [
            (p.name, p.kind, p.default) for p in parameters
        ]


@pytest.mark.parametrize("impl", ["cython", "python"])
def test_a_manager_binds_its_cores_lock_at_its_first_lock(impl: str) -> None:
    if impl == "cython" and CYTHON_CORE is None:
        pytest.skip(CYTHON_MISSING)
    manager = fastlock.LockManager(fastlock.Client("redis://127.0.0.1:1", impl=impl))
    first = manager.lock("job", args=[1], ttl=5)
    assert ("lock" in vars(manager)) is (impl == "cython")
    again = manager.lock("job", args=[1], ttl=5)
    assert type(again) is type(first) and slots(again) == slots(first)

    class Own(fastlock.LockManager):
        def lock(self, *args: Any, **kwargs: Any) -> fastlock.Lock:  # type: ignore[override]
            return super().lock(*args, **kwargs)

    own = Own(fastlock.Client("redis://127.0.0.1:1", impl=impl))
    own.lock("job", ttl=5)
    assert "lock" not in vars(own)  # a subclass's own lock is left as it is
