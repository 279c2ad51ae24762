"""Pages read without a browser: the overview's claims per minute (the fencing counter each
queue reads, ``claims``, and the rates :class:`~fastlock.web.reads.Throughput` makes of the
readings, on a fake clock) and the reaper's logged passes."""

from __future__ import annotations

import http.client
import os
import re
import time

from harness.web import Running

import fastlock
import fastlock.aio
from fastlock.queues.jobs import QueueStats
from fastlock.web.reads import QueueRow, Throughput

IDLE = QueueStats(0, 0, 0, 0)


def test_claims_count_every_lease(client: fastlock.Client) -> None:
    queue = client.queue("counted", max_attempts=3, backoff=0.0)
    assert queue.claims() == 0
    queue.enqueue_many([b"a", b"b", b"c"])
    first, _ = queue.claim(2)
    assert queue.claims() == 2
    queue.fail(first, "again")  # retried at once: its next attempt is another lease
    assert len(queue.claim(5)) == 2 and queue.claims() == 4


def test_rates_per_window_from_the_readings() -> None:
    now = [0.0]
    seen = Throughput(clock=lambda: now[0])
    assert seen.add([QueueRow("q", IDLE, 100)]) == {"q": [None, None]}
    now[0] = 5.0
    assert seen.add([QueueRow("q", IDLE, 110)]) == {"q": [None, None]}  # 5 s: under a tenth of 60
    now[0] = 30.0
    assert seen.add([QueueRow("q", IDLE, 160)]) == {"q": [120.0, None]}  # 60 claims in 30 s
    now[0] = 120.0
    # no reading in the last minute but this one; 240 claims in the 120 s since the first
    assert seen.add([QueueRow("q", IDLE, 340)]) == {"q": [None, 120.0]}
    now[0] = 150.0
    assert seen.add([QueueRow("q", IDLE, 430)]) == {"q": [180.0, 132.0]}
    now[0] = 125.0
    assert seen.add([QueueRow("q", IDLE, 3)]) == {"q": [None, None]}  # went back (a flushed server)


def _get(board: Running, path: str) -> str:
    connection = http.client.HTTPConnection(board.url.removeprefix("http://"), timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status == 200, path
        return response.read().decode()
    finally:
        connection.close()


def test_the_overview_shows_claims_per_minute(redis_url: str, client: fastlock.Client) -> None:
    board = Running(fastlock.aio.Client(redis_url), queues=["shown"])
    try:
        for _ in range(2):
            page = _get(board, "/")
        assert "claims/min, 1 min" in page and "claims/min, 15 min" in page and "\u2013" in page
        assert "oldest ready" in page
        client.queue("shown").enqueue(b"x")
        time.sleep(0.1)
        assert re.search(r"<td>\d+\.\d s</td>", _get(board, "/"))  # the ready job's age
    finally:
        board.stop()


def test_the_reaper_page_shows_the_logged_passes(redis_url: str, client: fastlock.Client) -> None:
    board = Running(fastlock.aio.Client(redis_url))
    try:
        assert "no pass logged yet" in _get(board, "/reaper")
        client.locks.lock("reaped", ttl=0.01).acquire("x")
        time.sleep(0.03)
        assert client.locks.reaper().run_once() is not None
        page = _get(board, "/reaper")
        assert f":{os.getpid()}</td>" in page and "orphans released" in page
    finally:
        board.stop()
