"""Screenshots of the dashboard's main pages for docs/ (``docs/web-*.png``): a private
redis-server filled with two queues (ready, delayed, active and dead jobs with tracebacks, claims
made a while apart for the throughput column), a lock namespace with holders and a changelog,
and a reaper pass; the dashboard served on a free port and shot by the system's headless
chromium (Playwright, as ``tests/web`` drives it).

``python tools/web_screenshots.py [--out docs]``
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import traceback
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

import fastlock
import fastlock.aio
from fastlock.testing.servers import TempServer, free_port
from fastlock.web import app

CHROMIUM_ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]
PAGES = {
    "overview": "/",
    "active": "/queues/mail?state=active",
    "dead": "/queues/mail?state=dead",
    "locks": "/locks",
    "reaper": "/reaper",
}


def fill(url: str) -> tuple[str, str]:
    """The data the pages show; returns a dead job's id and a lock's digest."""
    client = fastlock.Client(url)
    mail, billing = client.queue("mail", max_attempts=1), client.queue("billing")
    mail.enqueue_many([b'{"to": "ann@example.org"}'] * 1190)
    billing.enqueue_many([b'{"invoice": 7}'] * 40)
    mail.enqueue(b'{"to": "later@example.org"}', delay=3600)
    for job in mail.claim(4):
        try:
            raise ConnectionError("smtp.example.org:25 refused the connection")
        except ConnectionError as exc:
            mail.fail(job, "".join(traceback.format_exception(exc)))
    mail.claim(3)  # active: leased, running
    time.sleep(1.0)  # a first reading, then claims a while later: the throughput column
    locks = fastlock.LockManager(client, max_history=100)
    report = locks.lock("nightly-report", ttl=600, limit=2)
    report.acquire("worker-1")
    report.acquire("worker-2")
    locks.lock("invoice:7", queue="billing", ttl=30).acquire("job-42")
    locks.lock("expired", ttl=0.01).acquire("gone")
    time.sleep(0.05)
    locks.reaper().run_once()
    dead = mail.peek("dead", count=1).jobs[0].id
    return dead, report.digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs")
    args = parser.parse_args()
    server = TempServer().start()
    try:
        dead, digest = fill(server.url)
        port = free_port()
        board = app(fastlock.aio.Client(server.url), queues=["mail", "billing"], close_client=True)
        config = uvicorn.Config(board, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        web = uvicorn.Server(config)
        thread = threading.Thread(target=lambda: asyncio.run(web.serve()), daemon=True)
        thread.start()
        while not web.started:
            time.sleep(0.01)
        pages = {**PAGES, "job": f"/queues/mail/jobs/{dead}", "lock": f"/locks/{digest}"}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1100, "height": 540})
            page.goto(f"http://127.0.0.1:{port}/")  # the overview's first reading
            fastlock.Client(server.url).queue("mail").claim(60)  # claims since: claims per minute
            time.sleep(6.5)  # readings a tenth of a minute apart
            for name, path in pages.items():
                page.goto(f"http://127.0.0.1:{port}{path}")
                page.screenshot(path=str(args.out / f"web-{name}.png"))
                print(args.out / f"web-{name}.png")
            browser.close()
        web.should_exit = True
        thread.join(10)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
