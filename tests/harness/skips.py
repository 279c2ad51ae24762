"""Every skip must say something true about this machine.

A pytest plugin: each skip's reason is matched against the claims below, and each claim is
checked against the machine (is the TLS-less binary really without TLS, is the tool really
missing). A skip whose reason no claim matches, or whose claim is false, fails the run, so a
skip can never hide a feature that works here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from fastlock.testing.servers import find_binaries, tls_supported


def _cython_core_missing() -> bool:
    return importlib.util.find_spec("fastlock._core") is None


def _budgets() -> dict[str, dict[str, int]]:
    budgets = Path(__file__).resolve().parents[2] / "bench" / "budgets.toml"
    tables: dict[str, dict[str, int]] = tomllib.loads(budgets.read_text())["instructions"]["budgets"]
    return tables


def _has_budgets(toolchain: str) -> bool:
    return toolchain in _budgets()


def _has_budget(path: str, toolchain: str) -> bool:
    return path in _budgets().get(toolchain, {})


CLAIMS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], bool]]] = [
    (re.compile(r"\w+ binary (\S+) is built without TLS"), lambda m: not tls_supported(m[1])),
    (re.compile(r"(\w+) server unavailable"), lambda m: find_binaries()[m[1]][0] is None),
    (re.compile(r"FASTLOCK_TEST_URL"), lambda m: bool(os.environ.get("FASTLOCK_TEST_URL"))),
    (
        re.compile(r"Cython core \(?fastlock\._core\)? (cannot be imported|is not built)"),
        lambda m: _cython_core_missing(),
    ),
    (
        re.compile(r"INSTRUCTION GATE DID NOT RUN: (\w+)(?: and (\w+))? not on PATH"),
        lambda m: all(shutil.which(tool) is None for tool in m.groups() if tool),
    ),
    (re.compile(r"no instruction budgets for toolchain (.+)$"), lambda m: not _has_budgets(m[1])),
    (
        re.compile(r"no instruction budget for path '(.+)' on toolchain (.+)$"),
        lambda m: not _has_budget(m[1], m[2]),
    ),
    (re.compile(r"(\w+) not installed"), lambda m: shutil.which(m[1]) is None),
    (re.compile(r"could not import '([\w.]+)'"), lambda m: importlib.util.find_spec(m[1]) is None),
]


def false_claim(reason: str) -> str | None:
    """Why ``reason`` is not a true skip reason on this machine, or None when it is."""
    for pattern, holds in CLAIMS:
        match = pattern.search(reason)
        if match:
            return None if holds(match) else f"false on this machine: {reason}"
    return f"no check knows this reason (add one to tests/harness/skips.py): {reason}"


class SkipAudit:
    """Collects the run's skip reasons and fails the session on any untrue one."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}  # reason -> first test that gave it

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
            self.reasons.setdefault(reason, report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        bad = [(node, why) for reason, node in self.reasons.items() if (why := false_claim(reason))]
        if bad:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_sep("=", "untrue skip reasons", red=True)
                for node, why in bad:
                    reporter.write_line(f"{node}: {why}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
