"""Line breaks in script sources, counted as Lua counts them (issue 23, defect 1).

Lua ends a line at ``\\n``, ``\\r``, ``\\r\\n`` or ``\\n\\r`` and nowhere else: ``\\f``, ``\\v``,
``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029 (where ``str.splitlines`` also breaks) are
ordinary characters, inside a comment as anywhere. A script fastlock sends must mean what
its source means (the same bytes, behind the guard), and its error positions must count
lines as the server does.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastlock
from fastlock.scripts.registry import ScriptRegistry, guard
from fastlock.scripts.templates import SourceFile, lua_lines

NOT_LINE_BREAKS = "\v\f\x1c\x1d\x1e\x85\u2028\u2029"
LUA_BREAKS = ("\n", "\r", "\r\n", "\n\r")


def raw_and_fastlock(client: fastlock.Client, source: str) -> tuple[Any, Any]:
    """What ``EVAL source 0`` gives, and what the script registered from ``source`` gives:
    a value, or the error's (type, code, rendered line, message with positions taken out)."""

    def outcome(run: Any) -> Any:
        try:
            return run()
        except fastlock.ResponseError as exc:
            line = getattr(exc, "rendered_line", None)
            message = re.sub(r"(?:user_script|<script_\w+>):\d+:? ?", "", exc.message)
            if isinstance(exc, fastlock.LuaCompileError):  # what is "near" the end differs: the guard
                message = message.partition(" near ")[0]
            return (type(exc).__name__, exc.code, line, re.sub(r" script: \w*,? ?on @\S+$", "", message))

    return outcome(lambda: client.execute("EVAL", source, 0)), outcome(client.register_script(source))


def test_a_form_feed_ends_no_comment(client: fastlock.Client) -> None:
    source = "local x = 1 -- note\x0cx = 2\nreturn x"
    assert raw_and_fastlock(client, source) == (1, 1)
    assert client.register_script(source).script.body == guard(source).encode()


def test_a_line_separator_inside_a_string_is_kept(client: fastlock.Client) -> None:
    source = 'return "a\u2028b"'
    assert raw_and_fastlock(client, source) == ("a\u2028b".encode(), "a\u2028b".encode())


@pytest.mark.parametrize("char", NOT_LINE_BREAKS)
def test_no_other_character_breaks_a_line(char: str) -> None:
    source = f"-- a{char}b\nreturn 1 --[[{char}]]\r\n"
    script = ScriptRegistry(builtin=False).add("s", source)
    assert script.source == source and script.rendered.origins[-1][1] == 2
    assert script.body == guard(source).encode()
    assert guard(source) == "local fastlock_script = function() " + source + guard("").split("\n", 1)[1]


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", [("a", "")]),
        ("a\n", [("a", "\n")]),
        ("a\n\rb\r\n\r\n\rc", [("a", "\n\r"), ("b", "\r\n"), ("", "\r\n"), ("", "\r"), ("c", "")]),
        ("\n\n\r\r", [("", "\n"), ("", "\n\r"), ("", "\r")]),
        ("a\fb\u2028c\x85\n", [("a\fb\u2028c\x85", "\n")]),
        # a shebang line ends at the first \n, as the server reads it (a \n\r is still one break)
        ("#!lua\rx\n\ry", [("#!lua\rx", "\n\r"), ("y", "")]),
        ("#!lua\r", [("#!lua\r", "")]),
    ],
)
def test_lua_lines(text: str, lines: list[tuple[str, str]]) -> None:
    assert lua_lines(text) == lines
    assert "".join(line + end for line, end in lines) == text


def test_the_guard_keeps_the_shebang_and_every_break() -> None:
    close = guard("").split("\n", 1)[1]
    opening = "local fastlock_script = function() "
    assert guard("#!lua\n\rreturn 1") == "#!lua\n\r" + opening + "return 1\n" + close
    assert guard("#!lua\r\nreturn 1\r") == "#!lua\r\n" + opening + "return 1\r" + close
    assert guard("\n\rreturn 1\n") == opening + "\n\rreturn 1\n" + close
    assert guard("#!lua") == "#!lua"  # no line break: not a shebang the server accepts, sent as it is


def write(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


def test_files_keep_their_bytes_and_includes_their_line_count(
    tmp_path: Path, client: fastlock.Client
) -> None:
    files = {
        "crlf.lua": b"local s = [[a\n\rb\r\nc\rd]]\r\nreturn s\r\n",
        "main.lua": b'local n = 1\r-- #include "shared/_p.lua"\rerror("at main " .. n)\r',
        "shared/_p.lua": b"\n\rn = n + 1 --\x0c n = 10\n",
        "tail.lua": b'-- #include "shared/_q.lua"',
        "shared/_q.lua": b"\r\rerror('q')",
    }
    folder = write(tmp_path, files)
    with fastlock.Client(client.params.address, impl=client.impl, script_paths=[folder]) as fl:
        crlf = fl.scripts.get("crlf")
        assert crlf.source == files["crlf.lua"].decode() and fl.call("crlf") == b"a\nb\nc\nd"
        assert fl.execute("EVAL", files["crlf.lua"], 0) == b"a\nb\nc\nd"
        main = fl.scripts.get("main")
        assert len(lua_lines(main.source)) == len(main.rendered.origins) == 5
        with pytest.raises(fastlock.LuaRaisedError) as info:
            fl.call("main")
        assert (Path(info.value.file or "").name, info.value.line, info.value.message) == (
            "main.lua",
            3,
            "at main 2",
        )
        assert info.value.context.splitlines()[-1] == '  => 3 | error("at main " .. n)'
        tail = fl.scripts.get("tail")
        assert len(lua_lines(tail.source)) == len(tail.rendered.origins) == 4
        with pytest.raises(fastlock.LuaRaisedError) as info:
            fl.call("tail")
        assert (Path(info.value.file or "").name, info.value.line) == ("_q.lua", 3)


def test_source_file_lines_are_lua_lines() -> None:
    file = SourceFile.from_text("f.lua", None, "a\fb\r\nc\n\rd")
    assert file.lines == ("a\fb", "c", "d") and file.endings == ("\r\n", "\n\r", "")


# --- the property: any mix of line breaks means the same through EVAL and through fastlock ---

BREAKS = st.sampled_from([*LUA_BREAKS, " ", "\t", "\f", "\v", ";"])
ANY_CHAR = st.sampled_from(["a", " ", *LUA_BREAKS, *NOT_LINE_BREAKS])
TEXT = st.lists(ANY_CHAR, max_size=6).map("".join)
STATEMENTS = st.one_of(
    st.integers(1, 9).map(lambda n: f"x = x + {n}"),
    st.tuples(st.sampled_from([*LUA_BREAKS, *NOT_LINE_BREAKS]), st.integers(1, 9)).map(
        lambda c: f"-- note{c[0]}x = x * {c[1]}"
    ),
    TEXT.map(lambda text: f"s = s .. [[{text}]]"),
    TEXT.map(lambda text: f"--[[{text}]] x = x + 1"),
    st.lists(st.sampled_from(["b", *NOT_LINE_BREAKS]), max_size=3).map(
        lambda cs: f"s = s .. '{''.join(cs)}'"
    ),
    st.just("if x > 5 then error('big ' .. x) end"),
    st.just("'unfinished\r'"),
)
SHEBANGS = st.sampled_from(
    ["", "", "#!lua\n", "#!lua\r\n", "#!lua\n\r", "#!lua flags=no-writes\n", "#!lua\r"]
)


@st.composite
def sources(draw: st.DrawFn) -> str:
    parts = [draw(SHEBANGS), "local x, s = 0, ''", draw(BREAKS)]
    for statement in draw(st.lists(STATEMENTS, max_size=6)):
        parts += [statement, draw(BREAKS)]
    parts.append(
        draw(st.sampled_from(["return {x, s}", "return {x, s} --", "return {x, s}\n", "return {x, s}\r"]))
    )
    return "".join(parts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(source=sources())
def test_any_mix_of_line_breaks_means_the_same(client: fastlock.Client, source: str) -> None:
    raw, through_fastlock = raw_and_fastlock(client, source)
    assert through_fastlock == raw
    script = client.register_script(source).script
    assert script.source == source and len(lua_lines(source)) == len(script.rendered.origins)


def test_the_asyncio_client_sends_the_same_body(redis_url: str, impl: str) -> None:
    source = "local x = 1 -- note\x0cx = 2\nreturn {x, 'a\u2028b'}"

    async def main() -> Any:
        async with fastlock.AsyncClient(redis_url, impl=impl) as client:
            bound = client.register_script(source)
            assert bound.script.body == guard(source).encode()
            return await bound(), await client.execute("EVAL", source, 0)

    ours, raw = asyncio.run(main())
    assert ours == raw == [1, "a\u2028b".encode()]
