"""The dashboard in a real browser: headless chromium against a dashboard on the shared server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from harness.web import Running

import fastlock
from fastlock import Client
from fastlock.queues.worker import Worker
from fastlock.web import Auth

pytestmark = pytest.mark.slow  # a browser and a server thread per test

XSS = "<script>alert(1)</script>"


def _dead_job(client: Client, queue: str, payload: bytes, error: str) -> str:
    q = client.queue(queue)
    job_id = q.enqueue(payload)
    (job,) = q.claim(1)
    assert not q.fail(job, error, dead=True)
    return job_id


def test_overview_shows_each_queue_and_its_counts(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    with Client(redis_url) as client:
        client.queue("mail").enqueue_many([b"a", b"b", b"c"])
        client.queue("mail").enqueue(b"later", delay=60)
        _dead_job(client, "mail", b"x", "boom")
    board = dashboard(queues=["mail", "empty"])
    response = page.goto(board.url + "/")
    assert response.status == 200
    headers = response.headers
    assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no script at all
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert page.locator('meta[http-equiv="refresh"]').get_attribute("content") == "5"
    rows = page.locator("tr").all_inner_texts()
    assert rows[1].split("\t")[:5] == ["mail", "3", "1", "0", "1"]
    assert rows[2].split("\t")[:5] == ["empty", "0", "0", "0", "0"]


def test_a_dead_job_is_read_requeued_and_claimed_by_a_running_worker(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    healed, handled, errors = threading.Event(), list[str](), list[BaseException]()

    def handler(job: fastlock.Job) -> None:
        if not healed.is_set():
            raise ValueError("the mail server is down")
        handled.append(job.id)

    with Client(redis_url) as client:
        queue = client.queue("mail", max_attempts=1)
        job_id = queue.enqueue(b"send invoice 42")
        worker = Worker(queue, handler, idle_wait=0.1)

        def run() -> None:
            try:
                worker.run()
            except BaseException as exc:  # noqa: BLE001 - reaches the test below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while queue.stats().dead == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            board = dashboard(queues=["mail"])
            page.goto(board.url + "/")
            page.click("text=dead letters")
            page.click(f"text={job_id}")
            assert "send invoice 42" in page.inner_text("#payload")
            trace = page.inner_text("#traceback")
            assert "Traceback (most recent call last)" in trace and "in handler" in trace
            assert "ValueError: the mail server is down" in page.inner_text("table")
            healed.set()
            page.go_back()
            page.click("a:text-is('requeue')")
            page.click("#confirm")
            assert page.inner_text("#message") == "requeued 1 dead jobs"
            deadline = time.monotonic() + 30
            while not handled and time.monotonic() < deadline:
                time.sleep(0.02)
            assert handled == [job_id]
            while queue.stats()[:4] != (0, 0, 0, 0) and time.monotonic() < deadline:
                time.sleep(0.02)  # the worker completes the job once the handler has returned
            assert queue.stats()[:4] == (0, 0, 0, 0)
        finally:
            worker.stop()
            thread.join(10)
    assert errors == []


def test_a_lock_is_seen_with_its_holder_and_changelog_then_deleted(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    with Client(redis_url) as client:
        lock = fastlock.LockManager(client, max_history=100).lock("invoice-42", ttl=60, job_id="job-7")
        assert lock.acquire(blocking=False)
        digest = lock.digest
        board = dashboard()
        page.goto(board.url + "/locks")
        page.click(f"text={digest}")
        holders = page.locator("table").nth(0).inner_text()
        assert "job-7" in holders and "queue-time" in holders
        assert "locked" in page.locator("table").nth(1).inner_text()
        page.click("text=delete this lock")
        page.click("#confirm")
        assert page.inner_text("#message") == "removed 1 holders"
        assert client.locks.inspect(digest) == []


def test_a_script_in_a_payload_or_an_error_is_shown_as_text(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    name = XSS + "?x=1#top"  # a queue's name: a script tag, a "/", a query and a fragment
    with Client(redis_url) as client:
        job_id = _dead_job(client, name, XSS.encode(), f"{XSS}\n{XSS}")
    board = dashboard(queues=[name])
    page.goto(board.url + "/")
    page.get_by_role("link", name=name, exact=True).click()
    assert page.inner_text("h1") == f"queue {name}: ready"
    page.click("a:text-is('dead')")
    assert XSS in page.inner_text("table")
    page.click(f"text={job_id}")
    assert page.inner_text("#payload") == XSS
    assert page.inner_text("#traceback") == XSS
    assert page.locator("script").count() == 0
    page.go_back()
    page.click("a:text-is('requeue')")
    page.click("#confirm")
    assert page.inner_text("#message") == "requeued 1 dead jobs"
    with Client(redis_url) as client:
        assert client.queue(name).stats()[:4] == (1, 0, 0, 0)
    assert page.dialogs == []


def test_a_post_without_the_csrf_token_is_refused(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    with Client(redis_url) as client:
        _dead_job(client, "q", b"p", "e")
        board = dashboard(queues=["q"])
        page.goto(board.url + "/queues/q/dead/purge?all=1")  # the confirmation page sets the cookie
        refused = page.request.post(board.url + "/queues/q/dead/purge", form={})
        assert refused.status == 403 and "CSRF" in refused.text()
        forged = page.request.post(board.url + "/queues/q/dead/purge", form={"csrf": "a.b"})
        assert forged.status == 403
        assert client.queue("q").stats().dead == 1
        page.click("#confirm")
        assert page.inner_text("#message") == "purged 1 dead jobs"
        assert client.queue("q").stats().dead == 0


def test_read_only_mode_has_no_control_and_refuses_changes(
    redis_url: str, dashboard: Callable[..., Running], page: Any
) -> None:
    with Client(redis_url) as client:
        _dead_job(client, "q", b"p", "e")
        board = dashboard(queues=["q"], read_only=True)
        page.goto(board.url + "/queues/q?state=dead")
        assert "(read-only)" in page.inner_text("nav")
        assert page.locator("text=requeue").count() == 0 and page.locator("form").count() == 0
        assert page.goto(board.url + "/queues/q/dead/requeue?all=1").status == 403
        assert page.request.post(board.url + "/queues/q/dead/requeue", form={"csrf": "x"}).status == 403
        assert client.queue("q").stats().dead == 1


def test_auth_is_required_when_set(redis_url: str, dashboard: Callable[..., Running], browser: Any) -> None:
    board = dashboard(auth=Auth(token="s3cret", basic="admin:pw"))
    anonymous = browser.new_context()
    try:
        refused = anonymous.request.get(board.url + "/")  # a page would stop at the login prompt
        assert refused.status == 401 and refused.headers["www-authenticate"] == 'Basic realm="fastlock"'
        assert refused.headers["content-security-policy"].startswith("default-src 'none'")
        assert anonymous.request.get(board.url + "/", headers={"authorization": "Bearer s3cret"}).ok
        assert anonymous.request.get(board.url + "/", headers={"authorization": "Bearer s3cre"}).status == 401
    finally:
        anonymous.close()
    for user, password in (("admin", "pw"), ("anyone", "s3cret")):
        context = browser.new_context(http_credentials={"username": user, "password": password})
        try:
            assert context.new_page().goto(board.url + "/").status == 200
        finally:
            context.close()
    wrong = browser.new_context(http_credentials={"username": "admin", "password": "nope"})
    try:
        assert wrong.request.get(board.url + "/").status == 401
    finally:
        wrong.close()
