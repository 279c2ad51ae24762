"""8 processes at 10x a limiter's rate for FASTLOCK_LIMITER_SECONDS (10 s full size, 2 s short;
tests/harness/size.py): not one admission over the limit, counted on the server clock. MONITOR
records every script's commands; an admission is a script that wrote the key (the SET it runs
only when it admits), its time the server's TIME it read: for the window, exactly (the last
entry of the log it wrote); for GCRA, MONITOR's stamp of that TIME call."""

from __future__ import annotations

import multiprocessing
import struct
import time

import pytest
from harness.monitor import monitor, stamped
from harness.size import sized

import fastlock
from fastlock.testing.servers import TempServer

SECONDS = sized(10, 2, "FASTLOCK_LIMITER_SECONDS")
PROCESSES = 8
RATE, PER, BURST = 200, 1.0, 10
WINDOW_RATE, WINDOW = 100, 0.5
OVERLOAD = 10
SLACK = 1e-3
"""Seconds between a GCRA script's TIME reading and MONITOR's stamp of that call the count allows
(seen up to ~0.1 ms on a loaded machine; one admission too many is a whole interval, 5 ms)."""


def hammer(url: str, kind: str, until: float, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """Ask at OVERLOAD x the rate (this process's share), until ``until`` (time.time())."""
    with fastlock.Client(url) as client:
        if kind == "gcra":
            limiter = client.limiter("flood", rate=RATE, per=PER, burst=BURST)
        else:
            limiter = client.limiter("flood", rate=WINDOW_RATE, per=WINDOW, kind="window")
        pause = PROCESSES / (OVERLOAD * limiter.rate / limiter.per)
        asked = admitted = 0
        next_at = time.monotonic()
        while time.time() < until:
            asked += 1
            admitted += limiter.try_acquire().allowed
            next_at += pause
            time.sleep(max(0.0, next_at - time.monotonic()))
        results.put((asked, admitted))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gcra", "window"])
def test_no_over_admission_at_ten_times_the_rate(server: TempServer, redis_url: str, kind: str) -> None:
    with fastlock.Client(redis_url) as client:
        key = client.limiter("flood", kind=kind).key  # type: ignore[arg-type]
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    with monitor(server.unix_path) as recorded:
        until = time.time() + 1 + SECONDS
        args = (redis_url, kind, until, results)
        procs = [context.Process(target=hammer, args=args) for _ in range(PROCESSES)]
        for proc in procs:
            proc.start()
        counts = [results.get(timeout=SECONDS + 60) for _ in procs]
        for proc in procs:
            proc.join(10)
            assert proc.exitcode == 0
    stamps, read_at = [], 0.0
    for stamp, lua, args in stamped(recorded[0]):
        if lua and args[0] == b"TIME":
            read_at = stamp
        elif lua and args[0] == b"SET" and args[1] == key.encode():
            stamps.append(read_at if kind == "gcra" else struct.unpack(">d", args[2][-12:-4])[0] / 1e6)
    stamps.sort()
    asked, admitted = (sum(column) for column in zip(*counts, strict=True))
    assert len(stamps) == admitted  # every admission wrote once, and only admissions did
    span = stamps[-1] - stamps[0]
    if kind == "gcra":
        interval = PER / RATE
        assert admitted <= BURST + span / interval + 1
        # GCRA: admissions i..j (sorted) number at most BURST + (t_j - t_i) / interval, i.e.
        # j - t_j / interval <= i - t_i / interval + BURST - 1 for every i < j: the running minimum
        lowest = float("inf")
        for j, stamp in enumerate(stamps):
            score = j - stamp / interval
            assert score <= lowest + BURST - 1 + SLACK / interval, (j, stamp)
            lowest = min(lowest, score)
        expected = RATE / PER * span
    else:
        # the window: any WINDOW seconds hold at most WINDOW_RATE admissions
        for j in range(WINDOW_RATE, len(stamps)):
            assert stamps[j] - stamps[j - WINDOW_RATE] >= WINDOW, j
        expected = WINDOW_RATE / WINDOW * span
    assert asked >= 3 * admitted  # the limiter was asked far over its rate
    assert admitted >= 0.8 * expected  # and it admitted what the rate allows
