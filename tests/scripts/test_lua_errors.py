"""Lua error parsing and rewriting on the exact reply texts of Redis 6.2, Redis 7 and Valkey.

Redis 6.2 texts come from its source (``src/scripting.c``) and public transcripts;
the Redis 7.0 and Valkey 9.1 texts were captured from the live servers.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import fastlock
from fastlock.protocol.replies import Failure, parse, response_error
from fastlock.scripts.errors import context_block, lua_error
from fastlock.scripts.registry import Script, ScriptRegistry
from fastlock.scripts.templates import SourceFile

SHA = "82903a0434f1503e152f89c03c9acd881a0e8150"
RAISED, COMMAND, COMPILE = fastlock.LuaRaisedError, fastlock.LuaCommandError, fastlock.LuaCompileError
WRONG, READONLY, OOM = fastlock.LuaWrongTypeError, fastlock.LuaReadOnlyError, fastlock.LuaOutOfMemoryError
WRONGTYPE = "Operation against a key holding the wrong kind of value"
REPLICA = "You can't write against a read only replica."
MAXMEMORY = "command not allowed when used memory > 'maxmemory'."

PARSED = {
    "redis6 error()": (
        f"ERR Error running script (call to f_{SHA}): @user_script:1: user_script:1: boom ",
        Failure(RAISED, "ERR", "boom", 1),
    ),
    "redis6 WRONGTYPE": (
        f"ERR Error running script (call to f_{SHA}): @user_script:3: WRONGTYPE {WRONGTYPE} ",
        Failure(WRONG, "WRONGTYPE", WRONGTYPE, 3),
    ),
    "redis6 unknown command": (
        f"ERR Error running script (call to f_{SHA}): @user_script:2: @user_script: 2: "
        "Unknown Redis command called from Lua script ",
        Failure(COMMAND, "ERR", "Unknown Redis command called from Lua script", 2),
    ),
    "redis6 strict global": (
        f"ERR Error running script (call to f_{SHA}): @enable_strict_lua:15: user_script:1: "
        "Script attempted to access unexisting global variable 'argv' ",
        Failure(RAISED, "ERR", "Script attempted to access unexisting global variable 'argv'", 1),
    ),
    "redis6 error(msg, 0)": (
        f"ERR Error running script (call to f_{SHA}): @user_script:4: plain words ",
        Failure(RAISED, "", "plain words", 4),
    ),
    "redis6 strict global, no inner position": (
        f"ERR Error running script (call to f_{SHA}): @enable_strict_lua:8: oops ",
        Failure(RAISED, "", "oops", None),
    ),
    "compile": (
        "ERR Error compiling script (new function): user_script:3: unexpected symbol near '<eof>'",
        Failure(COMPILE, "ERR", "unexpected symbol near '<eof>'", 3),
    ),
    "function compile": (
        "ERR Error compiling function: user_function:4: unexpected symbol near 'end'",
        Failure(COMPILE, "ERR", "unexpected symbol near 'end'", 4),
    ),
    "redis7 error()": (
        f"ERR user_script:1: boom script: {SHA}, on @user_script:1.",
        Failure(RAISED, "ERR", "boom", 1),
    ),
    "redis7 error(msg, 2) points at the caller": (
        f"ERR user_script:5: up script: {SHA}, on @user_script:2.",
        Failure(RAISED, "ERR", "up", 5),
    ),
    "redis7 rethrown": (
        f"ERR user_script:2: user_script:1: inner script: {SHA}, on @user_script:2.",
        Failure(RAISED, "ERR", "user_script:1: inner", 2),
    ),
    "redis7 WRONGTYPE": (
        f"WRONGTYPE {WRONGTYPE} script: {SHA}, on @user_script:2.",
        Failure(WRONG, "WRONGTYPE", WRONGTYPE, 2),
    ),
    "redis6 READONLY pushed by redis.call (from the 6.2 source)": (
        f"ERR Error running script (call to f_{SHA}): @user_script:2: @user_script: 2: -READONLY {REPLICA}  ",
        Failure(READONLY, "READONLY", REPLICA, 2),
    ),
    "redis6 OOM pushed by redis.call (from the 6.2 source)": (
        f"ERR Error running script (call to f_{SHA}): @user_script:1: @user_script: 1: -OOM {MAXMEMORY}  ",
        Failure(OOM, "OOM", MAXMEMORY, 1),
    ),
    "redis6 no position at all": (
        f"ERR Error running script (call to f_{SHA}): error in error handling ",
        Failure(RAISED, "", "error in error handling", None),
    ),
    "redis7 READONLY": (
        f"READONLY {REPLICA} script: {SHA}, on @user_script:2.",
        Failure(READONLY, "READONLY", REPLICA, 2),
    ),
    "redis7 OOM": (
        f"OOM {MAXMEMORY} script: {SHA}, on @user_script:1.",
        Failure(OOM, "OOM", MAXMEMORY, 1),
    ),
    "redis7 NOPERM is ERR in scripts": (
        "ERR The user executing the script can't access at least one of the keys mentioned in the "
        f"command arguments script: {SHA}, on @user_script:1.",
        Failure(
            COMMAND,
            "ERR",
            "The user executing the script can't access at least one of the keys mentioned in the "
            "command arguments",
            1,
        ),
    ),
    "redis7 unknown command": (
        f"ERR Unknown Redis command called from script script: {SHA}, on @user_script:1.",
        Failure(COMMAND, "ERR", "Unknown Redis command called from script", 1),
    ),
    "redis7 error table": (
        f"MYCODE msg script: {SHA}, on @user_script:1.",
        Failure(RAISED, "MYCODE", "msg", 1),
    ),
    "redis7 error table impersonating NOSCRIPT": (
        f"NOSCRIPT No matching script. script: {SHA}, on @user_script:6.",
        Failure(RAISED, "NOSCRIPT", "No matching script.", 6),
    ),
    "redis7 code-less error table": (
        f"lowercase msg script: {SHA}, on @user_script:1.",
        Failure(RAISED, "", "lowercase msg", 1),
    ),
    "redis7 FCALL": (
        "ERR user_function:3: fboom script: f1, on @user_function:3.",
        Failure(RAISED, "ERR", "fboom", 3),
    ),
    "valkey error()": (
        "ERR user_script:1: boom script: on @user_script:1.",
        Failure(RAISED, "ERR", "boom", 1),
    ),
    "valkey WRONGTYPE": (
        f"WRONGTYPE {WRONGTYPE} script: on @user_script:2.",
        Failure(WRONG, "WRONGTYPE", WRONGTYPE, 2),
    ),
    "valkey READONLY": (
        f"READONLY {REPLICA} script: on @user_script:2.",
        Failure(READONLY, "READONLY", REPLICA, 2),
    ),
    "valkey OOM": (
        f"OOM {MAXMEMORY} script: on @user_script:3.",
        Failure(OOM, "OOM", MAXMEMORY, 3),
    ),
    "valkey unknown command": (
        "ERR Unknown command called from script script: on @user_script:1.",
        Failure(COMMAND, "ERR", "Unknown command called from script", 1),
    ),
    "valkey not allowed": (
        "ERR This Valkey command is not allowed from script script: on @user_script:1.",
        Failure(COMMAND, "ERR", "This Valkey command is not allowed from script", 1),
    ),
}


@pytest.mark.parametrize(("text", "expected"), PARSED.values(), ids=PARSED.keys())
def test_parse(text: str, expected: Failure) -> None:
    assert parse(text) == expected
    err = response_error(text)
    assert type(err) is expected.error and (err.code, err.message, err.rendered_line) == expected[1:]
    assert (err.script, err.file, err.line, str(err)) == ("", None, None, text)  # no script layer


def test_conditions_met_inside_a_script_are_caught_by_their_class() -> None:
    """One rule: an error's class follows its code; inside a script it is also a LuaCommandError."""
    for lua, server, code in (
        (READONLY, fastlock.ReadOnlyError, "READONLY"),
        (OOM, fastlock.OutOfMemoryError, "OOM"),
        (WRONG, fastlock.WrongTypeError, "WRONGTYPE"),
    ):
        assert issubclass(lua, fastlock.LuaCommandError) and issubclass(lua, server)
        assert server.in_script is lua and type(response_error(f"{code} x")) is server
    assert fastlock.NoScriptError.in_script is None and fastlock.ResponseError.in_script is None


@pytest.mark.parametrize(
    "text",
    [
        "MYCODE returned by redis.error_reply",
        "no such key",
        "NOSCRIPT No matching script. Please use EVAL.",
        "ERR Number of keys can't be greater than number of args",
    ],
)
def test_replies_without_a_script_position_are_not_parsed(text: str) -> None:
    assert parse(text) is None


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("NOSCRIPT No matching script. Please use EVAL.", fastlock.NoScriptError),  # Redis
        ("NOSCRIPT No matching script.", fastlock.NoScriptError),  # Valkey
        ("NOSCRIPT fake", fastlock.ResponseError),
        ("NOSCRIPT No matching script. Honest.", fastlock.ResponseError),
        (
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
            fastlock.BusyError,
        ),
        (
            "BUSY Valkey is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.",
            fastlock.BusyError,
        ),
        ("BUSY fake", fastlock.ResponseError),
    ],
)
def test_noscript_and_busy_only_in_the_servers_wording(text: str, cls: type[fastlock.ResponseError]) -> None:
    err = response_error(text)
    assert type(err) is cls and err.code == text.split()[0]


@pytest.fixture
def script(tmp_path: Path) -> Script:
    """main.lua (rendered lines 1 and 8-10) around shared/_owner.lua (rendered lines 2-7)."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "_owner.lua").write_text(
        "local function check(key, token)\n"
        '  local owner = redis.call("GET", key)\n'
        "  if owner ~= token then\n"
        '    error("not the owner")\n'
        "  end\n"
        "end\n"
    )
    (tmp_path / "main.lua").write_text(
        '-- #include "shared/_owner.lua"\ncheck(KEYS[1], ARGV[1])\nlocal n = 1\nreturn n\n'
    )
    return ScriptRegistry([tmp_path], builtin=False).get("main")


def rewrite(text: str, script: Script) -> fastlock.LuaError:
    err = lua_error(response_error(text), script)
    assert isinstance(err, fastlock.LuaError)
    return err


def test_error_inside_a_partial_points_into_the_partial(script: Script, tmp_path: Path) -> None:
    text = "ERR user_script:5: not the owner script: on @user_script:5."
    err = rewrite(text, script)
    assert type(err) is fastlock.LuaRaisedError
    assert (err.script, err.sha, err.file, err.line, err.rendered_line) == (
        "main",
        script.sha,
        str(tmp_path / "shared" / "_owner.lua"),
        4,
        5,
    )
    assert (err.code, err.message, err.text) == ("ERR", "not the owner", text)
    assert err.context == (
        '     2 |   local owner = redis.call("GET", key)\n'
        "     3 |   if owner ~= token then\n"
        '  => 4 |     error("not the owner")\n'
        "     5 |   end\n"
        "     6 | end"
    )
    assert str(err) == (
        f"script main raised an error at {tmp_path}/shared/_owner.lua:4: ERR not the owner\n{err.context}"
    )


def test_command_error_and_positions_inside_the_message(script: Script, tmp_path: Path) -> None:
    err = rewrite(f"WRONGTYPE {WRONGTYPE} script: on @user_script:3.", script)
    assert type(err) is fastlock.LuaWrongTypeError and isinstance(err, fastlock.WrongTypeError)
    assert (err.code, err.file, err.line) == ("WRONGTYPE", str(tmp_path / "shared" / "_owner.lua"), 2)
    assert str(err).startswith(f"script main had a command refused at {err.file}:2: WRONGTYPE {WRONGTYPE}\n")
    rethrown = rewrite("ERR user_script:9: user_script:5: not the owner script: on @user_script:9.", script)
    assert (rethrown.file, rethrown.line) == (str(tmp_path / "main.lua"), 3)
    assert rethrown.message == "shared/_owner.lua:4: not the owner"


def test_compile_error_past_the_last_line_is_clamped(script: Script, tmp_path: Path) -> None:
    err = rewrite("ERR Error compiling script (new function): user_script:11: '<eof>' expected", script)
    assert type(err) is fastlock.LuaCompileError
    assert (err.file, err.line, err.rendered_line) == (str(tmp_path / "main.lua"), 4, 11)
    assert err.context.splitlines()[-1] == "  => 4 | return n"
    assert str(err).startswith(f"script main does not compile at {tmp_path}/main.lua:4: ERR '<eof>' expected")


def test_returned_errors_and_server_refusals(script: Script) -> None:
    returned = rewrite("MYCODE custom failure", script)
    assert type(returned) is fastlock.LuaRaisedError
    assert (returned.file, returned.line, returned.context) == (None, None, "")
    assert str(returned) == "script main raised an error: MYCODE custom failure"
    codeless = rewrite("no such key", script)
    assert type(codeless) is fastlock.LuaRaisedError and (codeless.code, codeless.message) == (
        "",
        "no such key",
    )
    fake = rewrite("NOSCRIPT fake", script)
    assert type(fake) is fastlock.LuaRaisedError and fake.code == "NOSCRIPT"
    for text in (
        "READONLY You can't write against a read only replica.",
        "NOSCRIPT No matching script.",
        "ERR Number of keys can't be greater than number of args",
    ):
        refusal = response_error(text)
        assert lua_error(refusal, script) is refusal


def test_context_block_aligns_numbers_and_clamps() -> None:
    file = SourceFile("f.lua", None, tuple(f"line {n}" for n in range(1, 13)))
    assert context_block(file, 10) == (
        "      8 | line 8\n      9 | line 9\n  => 10 | line 10\n     11 | line 11\n     12 | line 12"
    )
    assert context_block(file, 1) == "  => 1 | line 1\n     2 | line 2\n     3 | line 3"


def test_errors_pickle_with_their_fields(script: Script) -> None:
    err = rewrite("ERR user_script:5: not the owner script: on @user_script:5.", script)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is type(err) and str(copy) == str(err) and copy.line == err.line and copy.sha == err.sha
    busy = fastlock.ScriptBusyError("BUSY Redis is busy running a script.", script="main", waited=1.5)
    busy_copy = pickle.loads(pickle.dumps(busy))
    assert type(busy_copy) is fastlock.ScriptBusyError and str(busy_copy) == str(busy)
    assert str(busy) == "script main: server still busy after 1.500 s: BUSY Redis is busy running a script."
    plain = pickle.loads(pickle.dumps(response_error("NOSCRIPT No matching script.")))
    assert type(plain) is fastlock.NoScriptError
    replica = pickle.loads(pickle.dumps(response_error(f"READONLY {REPLICA} script: on @user_script:2.")))
    assert type(replica) is READONLY and (replica.code, replica.rendered_line) == ("READONLY", 2)
