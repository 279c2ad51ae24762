"""Template rendering and the script registry, without a server."""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path

import pytest

import fastlock
from fastlock.scripts.registry import ScriptRegistry, builtin_folder, guard
from fastlock.scripts.templates import Rendered, Resolver, SourceFile, render


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def registry(tmp_path: Path, files: dict[str, str]) -> ScriptRegistry:
    return ScriptRegistry([write(tmp_path, files)], builtin=False)


def test_includes_are_pasted_once_and_mapped_back(tmp_path: Path) -> None:
    reg = registry(
        tmp_path,
        {
            "main.lua": 'local a = 1\n-- #include "shared/_b.lua"\n-- #include "shared/_c.lua"\nreturn a\n',
            "shared/_b.lua": '-- #include "shared/_c.lua"\nlocal b = 2\n',
            "shared/_c.lua": "local c = 3\n",
        },
    )
    script = reg.get("main")
    assert script.source == (
        "local a = 1\n"
        '-- #include "shared/_b.lua"\n'
        '-- #include "shared/_c.lua"\n'
        "local c = 3\n"
        "local b = 2\n"
        '-- #include "shared/_c.lua"\n'
        "return a\n"
    )
    origins = [(file.name, line) for file, line in script.rendered.origins]
    assert origins == [
        ("main.lua", 1),
        ("main.lua", 2),
        ("shared/_b.lua", 1),
        ("shared/_c.lua", 1),
        ("shared/_b.lua", 2),
        ("main.lua", 3),
        ("main.lua", 4),
    ]
    file, line = script.origin(4) or (None, 0)
    assert file is not None and file.path == str(tmp_path / "shared" / "_c.lua") and line == 1
    assert script.origin(0) is None and script.origin(8) is None
    assert script.sha == hashlib.sha1(script.body).hexdigest() and script.meta == ()
    assert script.body == guard(script.source).encode()


def test_the_guard_keeps_every_line_number() -> None:
    source = "#!lua flags=no-writes\nlocal a = 1\nreturn a\n"
    lines = guard(source).splitlines()
    assert lines[0] == "#!lua flags=no-writes" and len(lines) == 4
    assert lines[1].endswith(" local a = 1") and lines[2] == "return a" and lines[3].startswith("end ")
    assert guard("\n").splitlines()[1].startswith("end ")


def test_include_cycle_names_the_chain(tmp_path: Path) -> None:
    reg = registry(
        tmp_path,
        {
            "main.lua": 'local x = 1\n-- #include "shared/_a.lua"\n',
            "shared/_a.lua": '-- #include "shared/_b.lua"\n',
            "shared/_b.lua": 'local y\n-- #include "shared/_a.lua"\n',
            "itself.lua": '-- #include "itself.lua"\n',
        },
    )
    with pytest.raises(fastlock.TemplateError) as info:
        reg.get("main")
    assert str(info.value) == (
        "include cycle: main.lua:2 -> shared/_a.lua:1 -> shared/_b.lua:2 -> shared/_a.lua"
    )
    with pytest.raises(fastlock.TemplateError, match=r"include cycle: itself.lua:1 -> itself.lua$"):
        reg.get("itself")


def test_missing_partial_names_the_chain_and_folders(tmp_path: Path) -> None:
    reg = registry(
        tmp_path,
        {"main.lua": '-- #include "shared/_a.lua"\n', "shared/_a.lua": '\n-- #include "shared/_gone.lua"\n'},
    )
    with pytest.raises(fastlock.TemplateError) as info:
        reg.get("main")
    assert str(info.value) == (
        f"partial 'shared/_gone.lua' not found in {tmp_path} "
        "(include chain: main.lua:1 -> shared/_a.lua:2 -> shared/_gone.lua)"
    )
    assert "main" not in reg.loaded


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-- #include shared/_a.lua", 'main.lua:1: write includes as -- #include "shared/_name.lua"'),
        ('-- #include "../outside.lua"', "include '../outside.lua' must be a relative path"),
        ("-- #meta now later", "main.lua:1: unknown #meta field(s) later"),
    ],
)
def test_bad_directives(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(fastlock.TemplateError, match=re.escape(message)):
        registry(tmp_path, {"main.lua": line + "\n"}).get("main")


def test_constants_are_written_where_they_are_read(tmp_path: Path) -> None:
    """A ``-- #const`` block's names are written as their numbers in the lines rendered after
    each declaration (not in strings, comments or fields); every line keeps its number."""
    main = (
        "-- #const\n"
        "local LIMIT, NEG = 8, -1 -- a comment\n"
        "local RATE = 2.5\n"
        "\n"
        "local FREE = 3\n"
        '-- #include "shared/_p.lua"\n'
        "local t = {LIMIT, x = FREE}\n"
        "return f(LIMIT .. 'LIMIT', t.LIMIT, x:LIMIT(), 1 - NEG, RATE * WIDE) -- LIMIT\n"
    )
    reg = registry(tmp_path, {"main.lua": main, "shared/_p.lua": "-- #const\nlocal WIDE = 16\n"})
    script = reg.get("main")
    assert script.source.splitlines() == [
        "-- #const",
        "local LIMIT, NEG = 8, -1 -- a comment",
        "local RATE = 2.5",
        "",
        "local FREE = 3",  # not in the block: it ends at its first other line
        '-- #include "shared/_p.lua"',
        "-- #const",
        "local WIDE = 16",
        "local t = {8, x = FREE}",
        "return f(8 .. 'LIMIT', t.LIMIT, x:LIMIT(), 1 - (-1), 2.5 * 16) -- LIMIT",
    ]
    assert [line for _, line in script.rendered.origins] == [1, 2, 3, 4, 5, 6, 1, 2, 7, 8]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- #const\nlocal LIMIT = KEYS[1]\n", "main.lua:1: -- #const must be followed by lines like"),
        ("return 1\n-- #const", "main.lua:2: -- #const must be followed by lines like"),
        ("LIMIT = 9\n", "main.lua:3: constant LIMIT is assigned"),
        ("local x = {LIMIT = 1}\n", "main.lua:3: constant LIMIT is assigned"),
        ("local a, LIMIT\n", "main.lua:3: constant LIMIT is declared again"),
        ("\nfor _, LIMIT in x do end\n", "main.lua:4: constant LIMIT is declared again"),
        ("function t.f:g(a, LIMIT) end\n", "main.lua:3: constant LIMIT is declared again"),
        ("local function LIMIT() end\n", "main.lua:3: constant LIMIT is declared again"),
    ],
)
def test_a_constant_is_only_read(tmp_path: Path, text: str, message: str) -> None:
    if not text.startswith(("-- #const", "return")):
        text = "-- #const\nlocal LIMIT = 8\n" + text
    with pytest.raises(fastlock.TemplateError, match=re.escape(message)):
        registry(tmp_path, {"main.lua": text}).get("main")


def test_builtin_lock_scripts_read_no_flag_by_name() -> None:
    """The lock flags, declared constants, are numbers wherever the built-in scripts read them:
    their names are left in the declaration lines only (the suite runs the scripts)."""
    flags = re.compile(r"\b(TRACK|FENCING|WAITING|WAITED|QUEUED|DEQUEUED|FAIR|LISTENS|FRESH)\b")
    reg = ScriptRegistry()
    for name in ("lock_acquire", "lock_handoff", "rwlock_acquire"):
        code = [line.split("--")[0] for line in reg.get(name).source.splitlines()]
        assert [line for line in code if flags.search(line)] == [
            "local TRACK, FENCING, WAITING, WAITED, QUEUED, DEQUEUED, FAIR, LISTENS, FRESH = "
            "1, 2, 4, 8, 16, 32, 64, 128, 256"
        ], name


def test_meta_declarations_merge_in_documented_order(tmp_path: Path) -> None:
    reg = registry(
        tmp_path,
        {
            "main.lua": (
                '#!lua flags=no-writes\n-- #include "shared/_p.lua"\n-- #meta script_name now\nreturn 1\n'
            ),
            "shared/_p.lua": "-- #meta debug now\n",
            "plain.lua": "return #ARGV\n",
        },
    )
    script = reg.get("main")
    assert script.meta == ("now", "debug", "script_name")
    lines = script.source.splitlines()
    assert lines[0] == "#!lua flags=no-writes"  # the shebang stays first
    assert lines[1] == (
        "local META = {} do local n = #ARGV - 3 META.now = tonumber(ARGV[n + 1]) "
        'META.debug = ARGV[n + 2] == "1" META.script_name = ARGV[n + 3] '
        "for i = #ARGV, n + 1, -1 do ARGV[i] = nil end end"
    )
    prelude_file, prelude_line = script.origin(2) or (None, 0)
    assert prelude_file is not None and (prelude_file.name, prelude_line) == ("shared/_p.lua", 1)
    assert [(f.name, n) for f, n in script.rendered.origins[2:]] == [
        ("main.lua", 2),
        ("shared/_p.lua", 1),
        ("main.lua", 3),
        ("main.lua", 4),
    ]
    plain = reg.get("plain")
    assert plain.meta == () and plain.source == "return #ARGV\n"


def test_registry_lookup_rules(tmp_path: Path) -> None:
    mine = write(
        tmp_path / "mine",
        {"lock_acquire.lua": "return 'mine'\n", "helper.lua": '-- #include "shared/_x.lua"\n'},
    )
    theirs = write(
        tmp_path / "theirs",
        {
            "helper.lua": "return 'shadowed'\n",
            "uses_x.lua": '-- #include "shared/_x.lua"\n',
            "shared/_x.lua": "return 'theirs'\n",
            "_hidden.lua": "",
            "notes.txt": "",
        },
    )
    write(mine, {"shared/_x.lua": "return 'mine'\n"})
    reg = ScriptRegistry([mine, theirs], builtin=False)
    assert reg.names() == ["helper", "lock_acquire", "uses_x"]
    assert reg.get("helper").source.endswith("return 'mine'\n")  # first folder wins, and its partial
    assert reg.get("uses_x").source.endswith("return 'theirs'\n")  # a partial is found beside its includer
    with pytest.raises(fastlock.ScriptNotFoundError, match="no script 'nope'"):
        reg.get("nope")
    for bad in ("_hidden", "../x", "a/b", ""):
        with pytest.raises(ValueError, match="invalid script name"):
            reg.get(bad)
    with pytest.raises(ValueError, match="not a directory"):
        reg.add_path(tmp_path / "missing")


def test_registered_sources(tmp_path: Path) -> None:
    reg = registry(tmp_path, {"shared/_x.lua": "local x = 1\n", "on_disk.lua": "return 1\n"})
    script = reg.add("inline", '-- #include "shared/_x.lua"\nreturn x\n')
    assert script.path is None and script.rendered.origins[0][0].name == "<inline>"
    assert reg.add("inline", '-- #include "shared/_x.lua"\nreturn x\n') is script
    assert reg.get("inline") is script and "inline" in reg.names()
    with pytest.raises(ValueError, match="already in use"):
        reg.add("inline", "return 2\n")
    reg.get("on_disk")
    with pytest.raises(ValueError, match="already in use"):
        reg.add("on_disk", "return 2\n")


def test_builtin_folder_and_debug_partial() -> None:
    folder = builtin_folder()
    assert folder.joinpath("shared", "_debug.lua").is_file()
    reg = ScriptRegistry()
    assert reg.folders == (folder,)
    script = reg.add("uses_debug", '-- #include "shared/_debug.lua"\nlog_debug("x")\n')
    assert script.meta == ("debug", "script_name")


def test_registry_renders_each_script_once_under_many_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"s{i}" for i in range(8)]
    reg = registry(tmp_path, {f"{name}.lua": f"return '{name}'\n" for name in names})
    renders: list[str] = []

    def counting_render(main: SourceFile, resolve: Resolver) -> Rendered:
        renders.append(main.name)
        return render(main, resolve)

    monkeypatch.setattr("fastlock.scripts.registry.render", counting_render)
    start = threading.Barrier(24)
    seen: list[list[int]] = []

    def work() -> None:
        start.wait()
        seen.append([id(reg.get(name)) for name in names * 20])

    threads = [threading.Thread(target=work) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(renders) == sorted(f"{name}.lua" for name in names)
    assert all(ids == seen[0] for ids in seen) and len(seen) == 24
