"""The dashboard on a free port over the shared server (harness.web), and headless
chromium from the system's packages driven by Playwright. A missing chromium skips with a
checked reason, or fails when FASTLOCK_REQUIRE_BROWSER=1 (set in CI)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness.web import Running
from playwright import sync_api as playwright_sync

import fastlock.aio

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]


@pytest.fixture
def dashboard(redis_url: str) -> Iterator[Callable[..., Running]]:
    """Start dashboards over the shared server (flushed); each is stopped after the test."""
    started: list[Running] = []

    def start(**settings: Any) -> Running:
        started.append(Running(fastlock.aio.Client(redis_url), **settings))
        return started[-1]

    yield start
    for running in started:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, driven by Playwright's sync API. Module-scoped, never session-scoped: while
    that API runs, its event loop counts as running in this thread, so the other modules'
    ``asyncio.run`` would fail in the same worker."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("FASTLOCK_REQUIRE_BROWSER") == "1":
            pytest.fail("FASTLOCK_REQUIRE_BROWSER=1 but chromium is missing (apt-get install chromium)")
        pytest.skip("chromium not installed")
    with playwright_sync.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser context's page; every dialog it opens is recorded in ``page.dialogs``."""
    context = browser.new_context()
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.dialogs = []
    tab.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    yield tab
    context.close()
