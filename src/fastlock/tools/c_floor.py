"""The C floor: ``redis-benchmark`` (or ``valkey-benchmark``) sending the reference EVALSHA of
:mod:`fastlock.tools.bench` over one connection, the fastest any client could go; its script
loaded first, a failed run shown (exit status, stderr, stdout) and run once more."""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from .bench import EVALSHA_KEYS, EVALSHA_SCRIPT, Figures, Timing

__all__ = [
    "CFloorError",
    "FLOOR_ARGS",
    "FLOOR_RETRIES",
    "c_floor",
    "c_floor_command",
    "load_floor_script",
    "run_c_floor",
]


def _target(url: str) -> list[str]:
    if url.startswith("unix://"):
        return ["-s", url.removeprefix("unix://").split("?")[0]]
    host, _, port = url.split("://", 1)[1].split("/")[0].rpartition(":")
    return ["-h", host.rpartition("@")[2] or "127.0.0.1", "-p", port or "6379"]


FLOOR_ARGS = ("1", "two", "3.5", "four", "1")
"""``EVALSHA_ARGS`` as the C floor sends them (redis-benchmark takes strings)."""


def _floor_binary() -> str | None:
    return shutil.which("redis-benchmark") or shutil.which("valkey-benchmark")


def c_floor_command(
    url: str,
    *,
    cpu: int | None = None,
    requests: int = 50_000,
    keys: Sequence[str] = EVALSHA_KEYS,
    args: Sequence[Any] = FLOOR_ARGS,
) -> list[str] | None:
    """The command line of ``redis-benchmark`` (or ``valkey-benchmark``) with one connection
    and no pipelining, sending ``requests`` reference EVALSHAs to ``url`` (the script must be
    loaded: :func:`load_floor_script`), pinned to ``cpu``. ``None`` when neither binary is on PATH."""
    binary = _floor_binary()
    if binary is None:
        return None
    sha = hashlib.sha1(EVALSHA_SCRIPT.encode()).hexdigest()
    command = [binary, *_target(url), "-c", "1", "-P", "1", "-n", str(requests), "--csv"]
    command += ["EVALSHA", sha, str(len(keys)), *keys, *(str(a) for a in args)]
    if cpu is not None and shutil.which("taskset"):
        command = ["taskset", "-c", str(cpu), *command]
    return command


class CFloorError(RuntimeError):
    """The C floor could not be measured: ``redis-benchmark`` exited non-zero, timed out or
    printed no figure, in every attempt. A harness fault (the server, the script cache, the
    machine), not a slow client: the message carries each attempt's exit status, stderr and
    stdout."""

    def __init__(self, command: Sequence[str], attempts: Sequence[str]) -> None:
        self.command = list(command)
        self.attempts = list(attempts)
        super().__init__(
            f"the C floor could not be measured ({len(self.attempts)} attempt(s)): {' '.join(self.command)}\n"
            + "\n".join(self.attempts)
        )


FLOOR_RETRIES = 1
"""Attempts :func:`run_c_floor` makes after a failed one (a failed *measurement*, not a low figure)."""


def _tail(text: str, lines: int = 10) -> str:
    kept = text.strip().splitlines()[-lines:]
    return " | ".join(kept) if kept else "(empty)"


def _one_floor_run(command: Sequence[str]) -> tuple[float | None, str]:
    """Run the C floor once: its requests per second (``None`` when it failed) and, when
    it failed, why (exit status, stderr, stdout)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return None, f"timed out after {exc.timeout} s; stderr: {_tail(err)}; stdout: {_tail(out)}"
    why = f"exit status {done.returncode}; stderr: {_tail(done.stderr)}; stdout: {_tail(done.stdout)}"
    if done.returncode != 0:
        return None, why
    try:
        rps = float(done.stdout.strip().splitlines()[-1].split(",")[1].strip('"'))
    except (IndexError, ValueError):
        return None, f"no requests per second in its output; {why}"
    if not 0 < rps < float("inf"):
        return None, f"requests per second {rps!r}; {why}"
    return rps, ""


def run_c_floor(
    command: Sequence[str],
    timing: Timing,
    *,
    retries: int = FLOOR_RETRIES,
    on_retry: Callable[[str], object] | None = None,
) -> float:
    """Run the C floor once (``command`` must send ``timing.ops`` requests) and add the round
    to ``timing``: the wall time redis-benchmark reports, its CPU from ``getrusage``. Returns
    the process's whole lifetime (start-up included), in seconds.

    A run that fails (non-zero exit, timeout, no figure printed) is run again, ``retries``
    times at most; ``on_retry(why)`` hears of each failed attempt that is retried. When every
    attempt fails: :class:`CFloorError` with each attempt's exit status, stderr and stdout."""
    failures: list[str] = []
    while True:
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        rps, why = _one_floor_run(command)
        elapsed, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        if rps is not None:
            break
        failures.append(f"attempt {len(failures) + 1}: {why}")
        if len(failures) > retries:
            raise CFloorError(command, failures)
        if on_retry is not None:
            on_retry(failures[-1])
    timing.wall.append(timing.ops / rps)
    timing.user.append(after.ru_utime - before.ru_utime)
    timing.system.append(after.ru_stime - before.ru_stime)
    return elapsed


def load_floor_script(url: str) -> str:
    """``SCRIPT LOAD`` the reference script (``EVALSHA_SCRIPT``) on ``url``; its SHA1.

    The C floor sends ``EVALSHA`` of it, and ``redis-benchmark`` exits with status 1 at the
    first error reply, ``NOSCRIPT`` included: load it before every floor measurement rather
    than count on something else having loaded it (fastlock's own scripts carry a guard, so
    their SHA1 is not this one)."""
    from ..sync.client import Client

    with Client(url) as client:
        sha = client.execute("SCRIPT", "LOAD", EVALSHA_SCRIPT)
    return sha.decode() if isinstance(sha, bytes) else str(sha)


def c_floor(
    url: str,
    *,
    cpu: int | None = None,
    requests: int = 50_000,
    rounds: int = 3,
    keys: Sequence[str] = EVALSHA_KEYS,
    args: Sequence[Any] = FLOOR_ARGS,
) -> Figures | None:
    """Medians of ``rounds`` runs of the C floor (:func:`c_floor_command`); ``None`` when
    neither redis-benchmark nor valkey-benchmark is on PATH."""
    command = c_floor_command(url, cpu=cpu, requests=requests, keys=keys, args=args)
    if command is None:
        return None
    load_floor_script(url)
    timing = Timing(requests)
    for _ in range(rounds):
        run_c_floor(command, timing, on_retry=lambda _why: load_floor_script(url))
    return timing.figures(f"C floor: {os.path.basename(_floor_binary() or '')} -c 1 -P 1")
