"""Every error fastlock raises on bad input or misuse is a ``FastlockError`` (issue 23,
defect 2): the cases the sweep of the package found, each caught by ``except
fastlock.FastlockError``, sync and asyncio, both cores, and refused before anything is sent;
then a static check that no bare builtin exception is raised in ``src/fastlock`` beyond an
allow-list, each entry with its reason."""

from __future__ import annotations

import ast
import builtins
import pathlib
import re
from collections.abc import Callable, Iterator

import pytest

import fastlock
from fastlock.cluster.durability import check_wait
from fastlock.digest import canonical
from fastlock.locks.keys import KeySpace, check_prefix
from fastlock.operations import Operation
from fastlock.params import parse_url
from fastlock.queues.jobs import Unique
from fastlock.scripts.registry import ScriptRegistry
from fastlock.testing.proxy import TcpProxy
from fastlock.testing.servers import ExternalServer

SRC = pathlib.Path(fastlock.__file__).parent


def _bad_operation() -> Operation[None]:
    yield "not a step"  # type: ignore[misc]


def _refused(action: Callable[[], object]) -> fastlock.FastlockError:
    try:
        action()
    except fastlock.FastlockError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - the failure this test is about
        pytest.fail(f"{type(exc).__module__}.{type(exc).__qualname__} is not a FastlockError: {exc}")
    pytest.fail("nothing raised")


def _sync_cases(
    client: fastlock.Client, tmp_path: pathlib.Path
) -> Iterator[tuple[str, Callable[[], object]]]:
    script = client.register_script("return 1", name="taken")
    queue = client.queue("errors")
    yield "lock.extend without a ttl", lambda: client.lock("no-ttl", ttl=None).extend()
    yield "enqueue a job_id of the fresh mark", lambda: queue.enqueue(b"p", job_id="~x")
    yield "enqueue an empty job_id", lambda: queue.enqueue(b"p", job_id="")
    yield "peek an unknown state", lambda: queue.peek("bogus")
    yield "interrupt a key outside the queue", lambda: queue.interrupt("elsewhere")
    yield "a unique lock of a running-job type", lambda: Unique("n", type="while_executing")
    yield "a unique lock with a ttl it does not take", lambda: Unique("n", ttl=5)
    yield "a unique lock with a name and a digest", lambda: Unique("n", digest="d")
    yield "an unsupported URL scheme", lambda: parse_url("http://localhost")
    yield "a password with an unencoded '/'", lambda: parse_url("redis://u:a/b@host:1/0")
    yield "a port that is not a number", lambda: parse_url("redis://u:secret@host:port")
    yield "a port out of range", lambda: parse_url("redis://host:99999")
    yield "a db that is not a number", lambda: parse_url("redis://host/abc")
    yield "a query db that is not a number", lambda: parse_url("redis://host?db=x")
    yield "a timeout that is not a number", lambda: parse_url("redis://host?socket_timeout=x")
    yield "an empty pipeline command", lambda: client.pipeline().execute_command()
    yield "an empty command", lambda: client.execute()
    yield "an invalid script name", lambda: client.register_script("return 1", name="bad name")
    yield "a script name in use", lambda: client.register_script("return 2", name=script.name)
    yield "a script folder that is not one", lambda: ScriptRegistry([tmp_path / "missing"])
    yield "no connections", lambda: fastlock.Client(client.params.address, max_connections=0)
    yield "a namespace with a negative history", lambda: client.locks.__class__(client, max_history=-1)
    yield "a namespace of no buckets", lambda: KeySpace("p", 0)
    yield "a prefix with an empty hash tag", lambda: check_prefix("a{}b")
    yield "a reaper of no batch", lambda: client.locks.reaper(batch=0)
    yield "a durability wait of no replicas", lambda: check_wait((0, 10))
    yield "lock args json cannot encode", lambda: canonical("n", None, [object()])
    yield "an operation yielding a non-step", lambda: client.run(_bad_operation())
    yield "a proxy to another host", lambda: TcpProxy("10.0.0.1", 1)
    yield "an external server of another scheme", lambda: ExternalServer("http://x")


def test_errors_on_bad_input_are_fastlock_errors(client: fastlock.Client, tmp_path: pathlib.Path) -> None:
    client.execute("CONFIG", "RESETSTAT")
    failures = []
    for name, action in _sync_cases(client, tmp_path):
        try:
            _refused(action)
        except pytest.fail.Exception as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
    stats = client.execute("INFO", "commandstats").decode()
    assert "cmdstat_evalsha" not in stats and "cmdstat_eval:" not in stats  # refused before sending


def test_a_url_that_does_not_parse_never_shows_its_password() -> None:
    with pytest.raises(fastlock.ArgumentError, match="port") as info:
        parse_url("redis://user:s3cret@host:port/0")
    assert "s3cret" not in str(info.value) and info.value.__cause__ is None


def test_misuse_of_a_closed_client_or_a_running_reaper_is_a_fastlock_error(redis_url: str, impl: str) -> None:
    client = fastlock.Client(redis_url, impl=impl)
    reaper = client.locks.reaper(interval=60)
    reaper.start()
    try:
        assert isinstance(_refused(reaper.start), RuntimeError)  # still a RuntimeError too
    finally:
        reaper.stop()
    client.close()
    _refused(lambda: client.execute("PING"))


# --- static: no bare builtin exception raised in the package ------------------------------

ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("__init__.py", "AttributeError"): (1, "module __getattr__: the protocol of attribute lookup"),
    ("cluster/__init__.py", "AttributeError"): (1, "module __getattr__: the protocol of attribute lookup"),
    ("__main__.py", "SystemExit"): (1, "the CLI's exit status"),
    ("_impl.py", "ImportError"): (3, "a core that cannot be imported (FASTLOCK_IMPL): the import protocol"),
    ("locks/types.py", "ImportError"): (1, "the package's own Lua file is broken: at import"),
    ("exceptions.py", "RuntimeError"): (2, "the exception tree registered twice: at import, never by a call"),
    ("aio/client.py", "AssertionError"): (1, "an unreachable line"),
    ("_core.pyx", "AssertionError"): (1, "the debug build's invariant checks"),
    ("_coreparts/resp_writer.pxi", "MemoryError"): (2, "out of memory"),
    ("_core.pyx", "MemoryError"): (1, "out of memory"),
    ("_coreparts/resp_writer.pxi", "IndexError"): (
        1,
        "a list that shrank while it was encoded (another thread)",
    ),
    ("_coreparts/call_batch.pxi", "IndexError"): (
        1,
        "CommandQueue.call_at: the sequence protocol of an internal queue",
    ),
    ("_coreparts/call_py.py", "TypeError"): (
        1,
        "the twin of Cython's own check of a typed argument (internal)",
    ),
    ("_coreparts/resp_py.py", "OverflowError"): (
        1,
        "ReplyReader.feed: the twin of a C ssize_t argument's own error (Cython core, hiredis)",
    ),
    ("_coreparts/domain_jobs.pxi", "TypeError"): (
        1,
        "fastlock's own Job class is not a slots class: an internal invariant",
    ),
    ("_coreparts/aio_conn.pxi", "MemoryError"): (2, "out of memory"),
    ("_coreparts/aio_reply.pxi", "StopIteration"): (1, "the iterator protocol: a Reply's await ends"),
    ("_coreparts/aio_reply.pxi", "RuntimeError"): (1, "asyncio's own error of a future awaited wrongly"),
    ("_coreparts/muxcall.pxi", "StopIteration"): (2, "the coroutine protocol: a call's await ends"),
    ("_coreparts/muxcall.pxi", "RuntimeError"): (
        2,
        "the errors of a coroutine awaited wrongly or twice, as CPython's own",
    ),
    ("_coreparts/aio_py.py", "TypeError"): (1, "the twin of the core's own check of a typed argument"),
    ("sync/script_calls.py", "NotImplementedError"): (1, "an abstract method"),
    ("aio/script_calls.py", "NotImplementedError"): (1, "an abstract method"),
    ("queues/jobs.py", "ValueError"): (1, "a malformed reply, caught at once and raised as a ProtocolError"),
    ("queues/admin.py", "ValueError"): (4, "malformed replies, caught at once and raised as ProtocolErrors"),
    ("scripts/registry.py", "LookupError"): (
        2,
        "the include resolver's protocol: templates raise TemplateError",
    ),
    ("testing/servers.py", "FileNotFoundError"): (1, "test support: no redis-server binary installed"),
    ("tools/floor.py", "RuntimeError"): (1, "benchmark tooling: a measurement that cannot be trusted"),
    ("tools/instructions.py", "RuntimeError"): (2, "benchmark tooling: callgrind failed"),
}
"""``(file, builtin) -> (count, reason)``: the bare builtin raises kept, and why."""

_BUILTIN_ERRORS = {name for name, value in vars(builtins).items() if isinstance(value, type)}


def _imported_names(tree: ast.Module) -> set[str]:
    """Names a module imports from fastlock modules (its own ``ConnectionError``, ...)."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("fastlock"))
        for alias in node.names
    }


def _python_raises(path: pathlib.Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours = _imported_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if (
                isinstance(exc, ast.Attribute)
                and isinstance(exc.value, ast.Name)
                and exc.value.id == "builtins"
            ):
                yield exc.attr
            elif isinstance(exc, ast.Name) and exc.id in _BUILTIN_ERRORS and exc.id not in ours:
                yield exc.id


def _cython_raises(path: pathlib.Path) -> Iterator[str]:
    """``raise <Builtin>`` lines of a .pyx/.pxi file (names the core imports from
    fastlock.exceptions, e.g. ``ConnectionError``, are fastlock's)."""
    core = (SRC / "_core.pyx").read_text(encoding="utf-8")
    imports = re.findall(r"^from \.[\w.]* import (?:\(([^)]*)\)|(.*))$", core, re.MULTILINE)
    ours = {name.split()[-1] for group in imports for name in "".join(group).split(",") if name.strip()}
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "raise":
            name = words[1].partition("(")[0]
            if name in _BUILTIN_ERRORS and name not in ours:
                yield name


def test_no_bare_builtin_exception_is_raised_outside_the_allow_list() -> None:
    found: dict[tuple[str, str], int] = {}
    for path in sorted(SRC.rglob("*")):
        if path.suffix == ".py":
            names = list(_python_raises(path))
        elif path.suffix in (".pyx", ".pxi"):
            names = list(_cython_raises(path))
        else:
            continue
        for name in names:
            key = (path.relative_to(SRC).as_posix(), name)
            found[key] = found.get(key, 0) + 1
    unexpected = {key: n for key, n in found.items() if ALLOWED.get(key, (0, ""))[0] != n}
    assert not unexpected, (
        "bare builtin raises (raise a FastlockError subclass, e.g. ArgumentError, or list them in ALLOWED "
        f"with a reason): {unexpected}"
    )
    assert all(key in found for key in ALLOWED), f"stale ALLOWED entries: {set(ALLOWED) - set(found)}"
