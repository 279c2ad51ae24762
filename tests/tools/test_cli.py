"""``python -m fastlock locks|queue ...`` run as a subprocess against the private test servers:
JSON and table output, exit codes (0 done, 1 not found, 2 usage, 3 refused, 4 server) and
one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

import fastlock
from fastlock.queues.jobs import Unique

pytestmark = pytest.mark.slow  # slow tier: a subprocess per command


def cli(*args: str, url: str | None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "fastlock", *args, *(["--url", url] if url else [])]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)


def ok_json(*args: str, url: str) -> Any:
    run = cli(*args, "--json", url=url)
    assert (run.returncode, run.stderr) == (0, ""), run
    return json.loads(run.stdout)


def error_line(run: subprocess.CompletedProcess[str], code: int) -> str:
    assert run.returncode == code, run
    assert run.stdout == "" and run.stderr.count("\n") == 1, run
    return run.stderr


@pytest.fixture
def setup(redis_url: str) -> Any:
    with fastlock.Client(redis_url) as client:
        queue = client.queue("mail", max_attempts=1)
        ids = queue.enqueue_many([b"hello"] * 3)
        queue.enqueue(b"later", job_id="later", delay=60, unique=Unique("digest"))
        (claimed,) = queue.claim(1)
        queue.progress(claimed, {"done": 3, "of": 10})
        (dead,) = queue.claim(1)
        queue.fail(dead, "SMTPError: refused")
        client.lock("report", ttl=60).acquire("worker-1")
        client.lock("SendInvoice", queue="default", args=[42], ttl=60).acquire("job-42")
        yield queue, ids, claimed, dead


def test_queue_commands(redis_url: str, setup: Any) -> None:
    queue, ids, claimed, dead = setup
    assert ok_json("queue", "stats", "mail", url=redis_url) == {
        "ready": 1,
        "delayed": 1,
        "active": 1,
        "dead": 1,
        "paused": False,
    }
    page = ok_json("queue", "peek", "mail", "--state", "active", url=redis_url)
    assert (
        page["total"] == 1
        and page["jobs"][0]["id"] == claimed.id
        and page["jobs"][0]["token"] == claimed.token
    )
    table = cli("queue", "peek", "mail", "--state", "delayed", url=redis_url)
    assert table.returncode == 0 and "later" in table.stdout and "delayed: 1-1 of 1" in table.stdout
    job = ok_json("queue", "job", "mail", ids[2], url=redis_url)
    assert (job["state"], job["preview"], job["payload_size"]) == ("ready", "hello", 5)
    human = cli("queue", "job", "mail", "later", url=redis_url).stdout
    assert "state: delayed" in human and "at: " in human and "(in 5" in human
    assert ok_json("queue", "job", "mail", claimed.id, url=redis_url)["progress"] == {"done": 3, "of": 10}
    assert 'progress: {"done": 3, "of": 10}' in cli("queue", "job", "mail", claimed.id, url=redis_url).stdout
    assert "no job 'gone'" in error_line(cli("queue", "job", "mail", "gone", url=redis_url), 1)
    assert "purge it" in error_line(cli("queue", "cancel", "mail", dead.id, url=redis_url), 3)
    assert ok_json("queue", "cancel", "mail", "later", url=redis_url) == {
        "cancelled": "later",
        "state": "delayed",
    }
    assert ok_json("queue", "locks", "mail", url=redis_url) == {"cursor": 0, "locks": []}
    (listed,) = ok_json("queue", "dead", "mail", url=redis_url)
    assert (listed["id"], listed["error"]) == (dead.id, "SMTPError: refused")
    assert ok_json("queue", "requeue", "mail", dead.id, url=redis_url) == {"requeued": 1}
    assert cli("queue", "requeue", "mail", dead.id, url=redis_url).returncode == 1  # no longer dead
    assert ok_json("queue", "purge", "mail", url=redis_url) == {"purged": 0}
    assert queue.stats() == (2, 0, 1, 0, False)
    cancelled = cli("queue", "cancel", "mail", claimed.id, url=redis_url)
    assert cancelled.returncode == 0 and "its worker stops it" in cancelled.stdout
    assert "state: cancelled" in cli("queue", "job", "mail", claimed.id, url=redis_url).stdout
    assert not queue.holds(claimed) and claimed.cancelled


def test_queue_unique_locks(redis_url: str) -> None:
    started = time.monotonic()
    with fastlock.Client(redis_url) as client:
        queue = client.queue("mail")
        queue.enqueue(b"1", job_id="a", unique=Unique("x"))
        queue.enqueue(b"2", job_id="b", unique=Unique("y", type="until_expired", ttl=60))
        held, ttl = (
            queue.unique_digest(Unique("x")),
            queue.unique_digest(Unique("y", type="until_expired", ttl=60)),
        )
    listed = ok_json("queue", "locks", "mail", url=redis_url)
    assert listed["locks"] == [{"digest": held, "job_id": "a", "kind": "held", "ttl": None}]
    one = ok_json("queue", "locks", "mail", ttl, url=redis_url)["locks"][0]
    elapsed = time.monotonic() - started  # the CLI's subprocesses take a while on a loaded machine
    assert (one["job_id"], one["kind"]) == ("b", "ttl") and 59 - elapsed < one["ttl"] <= 60
    assert "no unique lock" in error_line(cli("queue", "locks", "mail", "f" * 64, url=redis_url), 1)


def test_locks_commands(redis_url: str, setup: Any) -> None:
    with fastlock.Client(redis_url) as client:
        digest = client.locks.digest("report")
    invoice = ok_json(
        "locks", "inspect", "SendInvoice", "--name", "--queue", "default", "--args", "[42]", url=redis_url
    )
    assert invoice["holders"][0]["job_id"] == "job-42"
    assert ok_json("locks", "delete", invoice["digest"], url=redis_url)["removed"] == 1
    listed = ok_json("locks", "list", url=redis_url)
    assert listed == {"cursor": "0", "entries": [{"digest": digest, "runtime": False, "limit": 1}]}
    assert digest in cli("locks", "list", url=redis_url).stdout
    (holder,) = ok_json("locks", "inspect", "report", "--name", url=redis_url)["holders"]
    assert (holder["job_id"], holder["token"], holder["runtime"]) == ("worker-1", 1, False)
    assert ok_json("locks", "reap", url=redis_url) == {"examined": 1, "dropped": 0, "released": 0}
    assert ok_json("locks", "delete", digest, url=redis_url) == {"digest": digest, "removed": 1}
    assert "no holder" in error_line(cli("locks", "inspect", digest, url=redis_url), 1)
    assert "no holder" in error_line(cli("locks", "delete", digest, url=redis_url), 1)


def test_usage_and_server_errors(redis_url: str) -> None:
    assert "count must be between 1 and 1000" in error_line(
        cli("queue", "peek", "mail", "--count", "5000", url=redis_url), 2
    )
    assert cli("queue", "peek", "mail", "--state", "done", url=redis_url).returncode == 2  # argparse
    assert cli("queue", url=redis_url).returncode == 2
    assert "usage: " in error_line(cli("locks", "inspect", "x", "--name", "--args", "{", url=redis_url), 2)
    assert "lowercase hex" in error_line(cli("locks", "delete", "report", url=redis_url), 2)  # a name: --name
    assert "ConnectionError" in error_line(cli("queue", "stats", "mail", url="redis://127.0.0.1:1/0"), 4)
    from_env = cli("queue", "stats", "mail", "--json", url=None, env={"FASTLOCK_URL": redis_url})
    assert json.loads(from_env.stdout) == {"ready": 0, "delayed": 0, "active": 0, "dead": 0, "paused": False}
