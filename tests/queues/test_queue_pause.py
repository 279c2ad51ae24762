"""Pausing a queue (both cores, both servers): claims return nothing while paused and the
pause shows in stats; producing, completing, releasing and peeking go on, each job's place
kept; a worker on a paused queue naps without asking the server anything and is woken by
resume; the admin CLI pauses, resumes and shows it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

from harness.blocking import wait_until_blocked

import fastlock
from fastlock.queues.jobs import QueueStats
from fastlock.queues.worker import Worker
from fastlock.tools.costs import command_calls

IDLE_WAIT = 0.05
"""A short idle wait: a paused worker that waited it out instead of napping would be seen asking."""


def test_claims_return_nothing_while_paused(client: fastlock.Client) -> None:
    queue = client.queue("p", lease=30)
    first = queue.enqueue(b"a")
    assert queue.pause() and not queue.pause()  # True only when it changed
    assert queue.stats() == QueueStats(1, 0, 0, 0, paused=True)
    for count in (1, 5):
        batch = queue.claim(count)
        assert batch == [] and batch.paused and batch.next_due_in is None
    ids = [first, *queue.enqueue_many([b"b", b"c"]), queue.enqueue(b"p", priority=1)]  # both lanes paused
    page = queue.peek("ready")
    assert page.total == 4 and [row.id for row in page.jobs] == ids  # no marker among the jobs
    assert [row.id for row in queue.peek("ready", offset=1, count=2).jobs] == ids[1:3]
    assert queue.stats() == QueueStats(4, 0, 0, 0, paused=True)
    assert queue.resume() and not queue.resume()
    assert queue.stats().paused is False
    held = queue.claim(2)
    assert [job.payload for job in held] == [b"a", b"b"]  # the order kept across the pause
    queue.pause()
    assert queue.complete(held[0], claim=1) == [] and queue.complete(held[1], claim=1).paused
    assert queue.stats() == QueueStats(2, 0, 0, 0, paused=True)


def test_a_release_while_paused_stays_under_the_pause(client: fastlock.Client) -> None:
    queue = client.queue("p", lease=30)
    queue.enqueue_many([b"a", b"b"])
    held = queue.claim(1)
    queue.pause()
    assert queue.release(held) == []
    assert queue.claim(2).paused and queue.stats() == QueueStats(2, 0, 0, 0, paused=True)
    assert queue.peek("ready").jobs[0].id == held[0].id
    queue.resume()
    assert [job.payload for job in queue.claim(2)] == [b"a", b"b"]  # the released job first


def test_a_paused_worker_naps_and_resume_wakes_it(client: fastlock.Client) -> None:
    queue = client.queue("p", lease=60)  # recovery every ~30 s: the nap's end
    queue.pause()
    handled = threading.Event()
    worker = Worker(queue, lambda job: handled.set(), idle_wait=IDLE_WAIT)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until_blocked(client, "bzpopmin")
        queue.enqueue(b"job")
        client.execute("CONFIG", "RESETSTAT")
        time.sleep(1.0)
        idle = command_calls(client)
        assert idle.get("evalsha", 0) == 0 and idle.get("bzpopmin", 0) == 0, idle  # 20 idle waits' worth
        assert not handled.is_set()
        started = time.monotonic()
        queue.resume()
        assert handled.wait(10) and time.monotonic() - started < 10  # woken, not at the nap's end
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_the_admin_cli_pauses_resumes_and_shows_it(redis_url: str) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "fastlock", "queue", *args, "--url", redis_url]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    assert cli("pause", "mail").returncode == 0
    stats = cli("stats", "mail", "--json")
    assert json.loads(stats.stdout) == {"ready": 0, "delayed": 0, "active": 0, "dead": 0, "paused": True}
    assert "paused" in cli("stats", "mail").stdout
    again = cli("pause", "mail", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == {
        "queue": "mail",
        "paused": True,
        "changed": False,
    }
    assert json.loads(cli("resume", "mail", "--json").stdout)["changed"] is True
    assert json.loads(cli("stats", "mail", "--json").stdout)["paused"] is False
