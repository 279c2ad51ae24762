"""Server instructions per lifecycle: ``python bench/server_instructions.py [-k NAME] [--ops N]``.

The deterministic twin of ``bench/server_cpu.py``. Each fastlock workload is recorded once
against a plain private server (:mod:`fastlock.tools.floor`), then replayed from C against a
private server running under ``valgrind --tool=callgrind`` (``hz 1``, so its timers add next
to nothing). ``callgrind_control`` zeroes the counters, the recording's untimed prefix is
replayed alone and dumped, then the whole recording: instructions per operation = (whole -
prefix) / ops. Counts move with the ids a recording draws by a few hundred instructions.

``--server`` picks the binary (``redis``, ``valkey`` or a path); ``--out DIR`` keeps the
dumps (``callgrind_annotate --inclusive=yes DIR/callgrind.out.<pid>.<n>``): with
``--breakdown`` the EVALSHA share and the script's ``redis.call``s are printed too (a
server built from source names every function; a packaged one may not).

``--prologue`` adds what every call of a script runs before its own statements (EVALSHA runs
the whole body: the partials' functions are made anew, the template's locals set): each
script of :data:`PROLOGUE` cut short there, beside a script doing nothing, both guarded as
fastlock sends them, and a Redis Function doing nothing (``FCALL``: a library's functions are
made once, at ``FUNCTION LOAD``), all given the same 5 keys and 4 arguments.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from fastlock import Client
from fastlock.scripts.registry import Script, ScriptRegistry, guard
from fastlock.testing.servers import TempServer, find_binaries
from fastlock.tools import floor
from fastlock.tools.bench import Workload
from fastlock.tools.workloads import ALL

PROLOGUE = ("lock_acquire", "lock_release")
"""The scripts ``--prologue`` cuts short: the two calls of every lock lifecycle."""
PROLOGUE_KEYS = tuple(f"{{p}}:k{n}" for n in range(1, 6))
PROLOGUE_ARGS = ("job", "scope", "30000", "3")

BREAKDOWN = {  # column -> functions whose inclusive cost it is (Redis 7.0 / Valkey names)
    "EVALSHA": ("evalShaCommand",),
    "redis.call": ("luaRedisGenericCommand", "luaRedisCallCommand", "luaRedisPCallCommand"),
    "inner commands": ("scriptCall",),
}


class CallgrindServer(TempServer):
    """A private server under callgrind, instrumentation on, dumping into ``out``."""

    def __init__(self, binary: str, out: Path) -> None:
        super().__init__(binary, extra_args=("--hz", "1"))
        self.out = out

    def _command_line(self) -> list[str]:
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}/callgrind.out.%p"]
        return [*valgrind, *super()._command_line()]

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def control(self, option: str) -> None:
        subprocess.run(["callgrind_control", option, str(self.pid)], check=True, capture_output=True)

    def dump(self) -> Path:
        """Dump the counts since the last dump (or zero); returns the dump's file."""
        before = set(self.out.glob(f"callgrind.out.{self.pid}.*"))
        self.control("-d")
        (path,) = set(self.out.glob(f"callgrind.out.{self.pid}.*")) - before
        return path


def total(dump: Path) -> int:
    """The instructions a dump counted."""
    match = re.search(r"^summary: (\d+)", dump.read_text(), re.M)
    assert match is not None, f"no summary in {dump}"
    return int(match[1])


def inclusive(dump: Path, names: tuple[str, ...]) -> int | None:
    """The inclusive instructions of the functions ``names`` (the outermost one found), or
    ``None`` (printed ``-``) when the dump has none of them: not called, or not named (the
    static functions of a stripped build, such as Debian's ``luaRedisGenericCommand``)."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = (re.finditer(rf"^\s*([\d,]+) .*:{name} ", text, re.M) for name in names)
    return max((int(match[1].replace(",", "")) for matches in found for match in matches), default=None)


def cut_short(script: Script) -> str:
    """``script``'s source returning at its template's first statement after the last line
    its partials rendered (every line keeps its number)."""
    lines = script.source.splitlines(keepends=True)
    template = script.rendered.origins[0][0]
    last = max(i for i, (file, _) in enumerate(script.rendered.origins) if file is not template)
    at = next(
        i for i in range(last + 1, len(lines)) if lines[i].strip() and not lines[i].lstrip().startswith("--")
    )
    lines[at] = "do return 1 end " + lines[at]
    return "".join(lines)


def _evalsha(source: str) -> Callable[[Client], Callable[[], object]]:
    """A workload set-up loading the guarded body of ``source`` and calling it."""
    body = guard(source).encode()
    sha = hashlib.sha1(body).hexdigest()

    def setup(client: Client) -> Callable[[], object]:
        client.execute("SCRIPT", "LOAD", body)
        return lambda: client.execute("EVALSHA", sha, len(PROLOGUE_KEYS), *PROLOGUE_KEYS, *PROLOGUE_ARGS)

    return setup


NOTHING = "#!lua name=fastlock_bench\nredis.register_function('nothing', function(keys, args) return 1 end)\n"
"""The library of ``--prologue``'s ``FCALL`` row (Redis 7.0+, Valkey)."""


def _fcall(client: Client) -> Callable[[], object]:
    """A workload set-up loading :data:`NOTHING` and calling its function."""
    client.execute("FUNCTION", "LOAD", "REPLACE", NOTHING)
    return lambda: client.execute("FCALL", "nothing", len(PROLOGUE_KEYS), *PROLOGUE_KEYS, *PROLOGUE_ARGS)


def prologues() -> list[Workload]:
    """The workloads of ``--prologue``."""
    registry = ScriptRegistry()
    sources = {"EVALSHA: a script doing nothing": "return 1"}
    sources.update((f"{name}: its prologue", cut_short(registry.get(name))) for name in PROLOGUE)
    evalsha = [Workload(label, _evalsha(source)) for label, source in sources.items()]
    return [*evalsha, Workload("FCALL: a function doing nothing", _fcall)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ops", type=int, default=1000, help="operations of the unbatched workloads (batched ones: more)"
    )
    parser.add_argument("-k", action="append", default=[], help="only workloads whose name holds this")
    parser.add_argument("--server", default="redis", help="redis, valkey, or the path of a server binary")
    parser.add_argument("--out", type=Path, default=None, help="keep the callgrind dumps here")
    parser.add_argument("--breakdown", action="store_true", help="EVALSHA and redis.call shares too")
    parser.add_argument("--prologue", action="store_true", help="the lock scripts' prologues too")
    options = parser.parse_args()
    binary = find_binaries().get(options.server, (options.server, ""))[0] or options.server
    workloads = [w for w in ALL if w.counted and (not options.k or any(k in w.name for k in options.k))]
    if options.prologue:
        workloads += prologues()
    with tempfile.TemporaryDirectory() as tmp:
        out = options.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        replay = floor.build_replay(tmp)
        assert replay is not None, "gcc is needed"
        recordings: list[tuple[str, int, Path, Path]] = []
        with TempServer(binary) as plain:
            for n, workload in enumerate(workloads):
                ops = max(options.ops, options.ops * workload.ops // 3000)  # batches: 10+ calls
                recording = floor.record(plain.unix_url, workload.setup, ops)
                whole, prefix = Path(tmp) / f"{n}.whole", Path(tmp) / f"{n}.prefix"
                recording.save(whole)
                floor.Recording(recording.writes[: recording.prefix], recording.prefix, 0).save(prefix)
                recordings.append((workload.name, ops, prefix, whole))
        with CallgrindServer(binary, out) as server:
            # every script a workload calls loaded, as on the server it was recorded on (else
            # its replayed EVALSHA gets NOSCRIPT); counted before the counters are zeroed
            floor.preload(server.unix_url, [workload.setup for workload in workloads])
            print(f"server instructions per operation replayed from C ({binary})")
            columns = list(BREAKDOWN) if options.breakdown else []
            print(f"{'workload':50s} {'instructions':>12s}" + "".join(f" {c:>14s}" for c in columns))
            for name, ops, prefix, whole in recordings:
                server.control("-z")
                floor.replay_c(replay, server.unix_url, prefix)
                first = server.dump()
                floor.replay_c(replay, server.unix_url, whole)
                second = server.dump()
                row = f"{name:50s} {(total(second) - total(first)) / ops:12,.0f}"
                for column in columns:
                    names = BREAKDOWN[column]
                    whole_count, prefix_count = inclusive(second, names), inclusive(first, names)
                    if whole_count is None or prefix_count is None:
                        row += f" {'-':>14s}"
                    else:
                        row += f" {(whole_count - prefix_count) / ops:14,.0f}"
                print(row, flush=True)


if __name__ == "__main__":
    main()
