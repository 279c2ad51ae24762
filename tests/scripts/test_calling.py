"""The script-call policy of :mod:`fastlock.scripts.calling` driven by hand, without a server:
replies and exceptions are fed into the operations and the steps they yield are checked."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fastlock
from fastlock.operations import Command, Commands, Operation, Sleep, Step
from fastlock.protocol.replies import response_error
from fastlock.scripts.calling import (
    BUSY_FIRST_DELAY,
    BUSY_MAX_DELAY,
    MAX_RELOADS,
    ScriptSettings,
    check_loaded,
    kill_busy_script,
    load_commands,
    meta_values,
    read_server_version,
    record_call,
    record_failure,
    recover,
)
from fastlock.scripts.registry import Script, ScriptRegistry

LUA = Path(__file__).parents[1] / "lua"
NOSCRIPT = "NOSCRIPT No matching script."
BUSY = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
FUNCTION_BUSY = "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
COMPILE = "ERR Error compiling script (new function): user_script:1: unexpected symbol near '='"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def script() -> Script:
    return ScriptRegistry([LUA], builtin=False).get("counter")


@pytest.fixture
def clock() -> Clock:
    return Clock()


def start(operation: Operation[Any]) -> Step:
    return operation.send(None)


def finish(step: Callable[[], object]) -> Any:
    """The value the operation returns on ``step()`` (sending its last result)."""
    with pytest.raises(StopIteration) as stop:
        step()
    return stop.value.value


def evalsha(script: Script, keys: tuple[Any, ...] = ("k",), args: tuple[Any, ...] = (1,)) -> Command:
    return Command(("EVALSHA", script.sha, len(keys), *keys, *args))


def recovering(
    script: Script, error: str, clock: Clock, settings: ScriptSettings | None = None
) -> Operation[Any]:
    """The recovery of a call ``script(["k"], [1])`` that started now and got ``error``."""
    settings = settings or ScriptSettings()
    return recover(script, ("k",), (1,), response_error(error), clock(), settings, clock=clock)


def test_noscript_loads_and_runs_again_in_one_write(script: Script, clock: Clock) -> None:
    settings = ScriptSettings(server_version="7.2.4")
    op = recovering(script, NOSCRIPT, clock, settings)
    assert start(op) == Commands([("SCRIPT", "LOAD", script.body), evalsha(script).args])
    assert settings.server_version is None  # the server may have changed
    assert finish(lambda: op.send([script.sha.encode(), 7])) == 7
    assert script.stats.snapshot().reloads == 1


def test_noscript_is_reloaded_at_most_max_reloads_times(script: Script, clock: Clock) -> None:
    op = recovering(script, NOSCRIPT, clock)
    step = start(op)
    for _ in range(MAX_RELOADS - 1):
        step = op.send([script.sha.encode(), response_error(NOSCRIPT)])
        assert isinstance(step, Commands)
    with pytest.raises(fastlock.NoScriptError):
        op.send([script.sha.encode(), response_error(NOSCRIPT)])
    assert script.stats.snapshot().reloads == MAX_RELOADS


def test_a_load_that_fails_raises_the_lua_error(script: Script, clock: Clock) -> None:
    op = recovering(script, NOSCRIPT, clock)
    start(op)
    with pytest.raises(fastlock.LuaCompileError) as info:
        op.send([response_error(COMPILE), response_error(NOSCRIPT)])
    assert (info.value.script, info.value.line) == ("counter", 1)


def test_an_error_of_the_reloaded_call_is_recovered_too(script: Script, clock: Clock) -> None:
    op = recovering(script, NOSCRIPT, clock)
    start(op)
    # the server became busy between the load and the EVALSHA (the load's BUSY is ignored)
    assert isinstance(op.send([response_error(BUSY), response_error(BUSY)]), Sleep)
    assert op.send(None) == evalsha(script)
    assert finish(lambda: op.send(3)) == 3


def test_busy_sleeps_with_jittered_exponential_backoff(script: Script, clock: Clock) -> None:
    op = recovering(script, BUSY, clock)
    step, delay, sleeps = start(op), BUSY_FIRST_DELAY, []
    for _ in range(8):
        assert isinstance(step, Sleep) and delay / 2 <= step.seconds <= delay
        sleeps.append(step.seconds)
        clock.now += step.seconds
        assert op.send(None) == evalsha(script)
        step = op.throw(response_error(BUSY))
        delay = min(delay * 2, BUSY_MAX_DELAY)
    assert max(sleeps) <= BUSY_MAX_DELAY and sleeps[-1] >= BUSY_MAX_DELAY / 2
    assert isinstance(step, Sleep)
    op.send(None)
    assert finish(lambda: op.send(b"done")) == b"done"


def test_busy_until_the_deadline_raises_script_busy_error(script: Script, clock: Clock) -> None:
    settings = ScriptSettings(busy_timeout=0.5)
    op = recovering(script, BUSY, clock, settings)
    clock.now += 0.45
    step = start(op)
    assert isinstance(step, Sleep) and step.seconds <= 0.05  # never sleeps past the deadline
    clock.now += 0.05
    op.send(None)
    with pytest.raises(fastlock.ScriptBusyError) as info:
        op.throw(response_error(BUSY))
    assert (info.value.script, info.value.waited, info.value.text) == ("counter", 0.5, BUSY)


def test_the_calls_busy_timeout_overrides_the_settings(script: Script, clock: Clock) -> None:
    op = recover(script, ("k",), (1,), response_error(BUSY), clock(), ScriptSettings(), 0.0, clock=clock)
    with pytest.raises(fastlock.ScriptBusyError):
        start(op)


KILLS = [(BUSY, ("SCRIPT", "KILL")), (FUNCTION_BUSY, ("FUNCTION", "KILL"))]


@pytest.mark.parametrize(("busy", "kill"), KILLS)
def test_kill_after_kill_busy_after_then_retry_at_once(
    script: Script, clock: Clock, busy: str, kill: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    op = recovering(script, busy, clock, ScriptSettings(kill_busy_after=0.2))
    assert isinstance(start(op), Sleep)  # not yet: waited 0 s
    clock.now += 0.2
    op.send(None)
    assert op.throw(response_error(busy)) == Command(kill)
    assert op.send(b"OK") == Sleep(0.0)  # the kill worked: retry at once
    assert op.send(None) == evalsha(script)
    assert finish(lambda: op.send(1)) == 1
    assert f"sent {' '.join(kill)}" in caplog.text


def test_kill_refused_is_asked_once_then_waited_for(
    script: Script, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    op = recovering(script, BUSY, clock, ScriptSettings(kill_busy_after=0.0))
    assert start(op) == Command(("SCRIPT", "KILL"))
    step = op.throw(response_error("UNKILLABLE Sorry the script already executed write commands"))
    assert isinstance(step, Sleep) and step.seconds > 0
    assert "SCRIPT KILL refused" in caplog.text
    for _ in range(3):  # never asked again
        assert op.send(None) == evalsha(script)
        assert isinstance(op.throw(response_error(BUSY)), Sleep)


def test_kill_finding_no_busy_script_means_not_busy(clock: Clock) -> None:
    op = kill_busy_script(fastlock.BusyError(BUSY))
    assert start(op) == Command(("SCRIPT", "KILL"))
    assert finish(lambda: op.throw(response_error("NOTBUSY No scripts in execution right now."))) is True


def test_other_errors_become_lua_errors(script: Script, clock: Clock) -> None:
    op = recovering(script, "ERR user_script:1: boom script: f_0123, on @user_script:1.", clock)
    with pytest.raises(fastlock.LuaRaisedError) as info:
        start(op)
    assert info.value.script == "counter" and info.value.__suppress_context__
    with pytest.raises(fastlock.ReadOnlyError):  # refused by the server: unchanged
        start(recovering(script, "READONLY You can't write against a read only replica.", clock))


def test_transport_errors_thrown_in_are_not_handled(script: Script, clock: Clock) -> None:
    op = recovering(script, BUSY, clock)
    start(op)
    op.send(None)
    lost = fastlock.ConnectionError("connection lost", sent=True)
    with pytest.raises(fastlock.ConnectionError) as info:
        op.throw(lost)
    assert info.value is lost


def test_server_version_is_read_once_and_cached() -> None:
    settings = ScriptSettings()
    op = read_server_version(settings)
    assert start(op) == Command(("INFO", "server"))
    info = b"# Server\r\nredis_version:7.2.4\r\nredis_git_sha1:00000000\r\n"
    assert finish(lambda: op.send(info)) == "7.2.4" == settings.server_version
    assert finish(lambda: start(read_server_version(settings))) == "7.2.4"  # no step


def test_meta_values_follow_the_declared_fields() -> None:
    registry = ScriptRegistry([LUA], builtin=False)
    settings = ScriptSettings(debug=True, max_history=7, server_version="8.0.0")
    before = time.time()
    now, *rest = meta_values(registry.get("meta_all"), settings)
    assert before <= now <= time.time() and rest == [True, 7, "meta_all", "8.0.0"]
    assert meta_values(registry.get("meta_some"), settings)[1:] == ["meta_some"]  # in canonical order
    assert meta_values(registry.get("counter"), settings) == []


def test_warm_up_commands_and_their_replies(script: Script) -> None:
    registry = ScriptRegistry([LUA], builtin=False)
    scripts = [script, registry.get("echo")]
    assert load_commands(scripts) == [("SCRIPT", "LOAD", s.body) for s in scripts]
    check_loaded(scripts, [s.sha.encode() for s in scripts])
    with pytest.raises(fastlock.LuaCompileError) as info:
        check_loaded(scripts, [script.sha.encode(), response_error(COMPILE)])
    assert info.value.script == "echo"


def test_records_count_calls_and_failures(script: Script, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fastlock.scripts")
    record_call(script, ScriptSettings(), 0.25)
    record_call(script, ScriptSettings(debug=True), 0.5)
    record_failure(script, ScriptSettings(debug=True), 1.0, fastlock.ScriptBusyError(BUSY))
    counters = script.stats.snapshot()
    assert (counters.calls, counters.errors, counters.total_time) == (3, 1, 1.75)
    assert [r.getMessage().split(" ms")[0] for r in caplog.records] == [
        "script counter took 500.000",
        "script counter failed after 1000.000",
    ]
