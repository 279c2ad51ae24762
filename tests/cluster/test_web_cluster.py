"""The dashboard over an AsyncClusterClient and an AsyncSentinelClient: every page's admin
call and a change (a CSRF-checked requeue) route through them like any other call. (The
browser tests are in tests/web.)"""

from __future__ import annotations

import http.client
import re
from typing import Any
from urllib.parse import urlencode

from harness.web import Running

import fastlock
from fastlock.cluster import AsyncClusterClient, AsyncSentinelClient, ClusterClient, SentinelClient
from fastlock.testing.sentinel import TempSentinels


def _get(board: Running, path: str, cookie: str = "") -> tuple[int, str, str]:
    connection = http.client.HTTPConnection(board.url.removeprefix("http://"), timeout=10)
    try:
        connection.request("GET", path, headers={"cookie": cookie} if cookie else {})
        response = connection.getresponse()
        return response.status, response.read().decode(), response.getheader("set-cookie") or ""
    finally:
        connection.close()


def _every_page_and_a_requeue(client: Any, source: Any) -> None:
    """Through a dashboard over ``source``: each page shows what ``client`` wrote; a requeue works."""
    queue = client.queue("mail", max_attempts=1)
    job_id = queue.enqueue(b"send invoice 42")
    (job,) = queue.claim(1)
    queue.fail(job, "RuntimeError: down\nTraceback: here", dead=True)
    lock = fastlock.LockManager(client, max_history=10).lock("invoice-42", ttl=60, job_id="job-7")
    assert lock.acquire(blocking=False)
    board = Running(source, queues=["mail"])
    try:
        status, page, _ = _get(board, "/")
        assert status == 200 and "mail</a></td><td>0</td><td>0</td><td>0</td><td>1</td>" in page
        assert _get(board, f"/queues/mail/jobs/{job_id}")[1].count("Traceback: here") == 1
        assert job_id in _get(board, "/queues/mail?state=dead")[1]
        assert lock.digest in _get(board, "/locks")[1]
        assert "job-7" in _get(board, f"/locks/{lock.digest}")[1]
        status, page, cookie = _get(board, f"/queues/mail/dead/requeue?{urlencode({'id': job_id})}")
        match = re.search(r'name="csrf" value="([^"]+)"', page)
        assert status == 200 and match and cookie.startswith("fastlock_csrf=")
        connection = http.client.HTTPConnection(board.url.removeprefix("http://"), timeout=10)
        body = urlencode({"csrf": match[1], "id": job_id})
        headers = {"cookie": cookie.split(";")[0], "content-type": "application/x-www-form-urlencoded"}
        connection.request("POST", "/queues/mail/dead/requeue", body, headers)
        response = connection.getresponse()
        assert response.status == 200 and "requeued 1 dead jobs" in response.read().decode()
        connection.close()
        assert queue.stats()[:4] == (1, 0, 0, 0)
    finally:
        board.stop()


def test_every_page_and_a_requeue_over_a_cluster(cluster_url: str) -> None:
    with ClusterClient(cluster_url) as client:
        _every_page_and_a_requeue(client, AsyncClusterClient(cluster_url))


def test_every_page_and_a_requeue_over_sentinel(sentinels: TempSentinels) -> None:
    """An AsyncSentinelClient connects on the serving loop: the app takes its async factory."""
    with SentinelClient(sentinels.sentinels, sentinels.service) as client:
        _every_page_and_a_requeue(
            client, lambda: AsyncSentinelClient.connect(sentinels.sentinels, sentinels.service)
        )
