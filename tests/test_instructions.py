"""The deterministic perf gate: client instructions per operation under callgrind
(``bench/instructions.py``) against this toolchain's budgets and the same-run ratios of
``bench/budgets.toml``. Without valgrind or gcc the gate skips, said in the terminal
summary, unless ``FASTLOCK_REQUIRE_INSTRUCTION_GATE=1`` (CI), which makes that a failure."""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

# slow tier: valgrind; one xdist worker measures every path once (pyproject: --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("instruction-gate")]

_SOURCE = Path(__file__).resolve().parent.parent / "bench" / "instructions.py"
_spec = importlib.util.spec_from_file_location("fastlock_bench_instructions", _SOURCE)
assert _spec is not None and _spec.loader is not None
gate: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = gate  # dataclasses look their module up there
_spec.loader.exec_module(gate)

SETTINGS = gate.load_settings()


@dataclass(eq=False)  # a pytest plugin must be hashable (pytest 9 keeps plugins in a set)
class Summary:
    """Lines for the pytest terminal summary: what the gate measured, or why it did not."""

    lines: list[str] = field(default_factory=list)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.lines:
            loud = line.startswith("INSTRUCTION")
            terminalreporter.write_line(line, yellow=loud, bold=loud)


@dataclass
class Run:
    measurement: Any
    toolchain: str
    budgets: dict[str, int] | None


def _not_run(summary: Summary, why: str) -> NoReturn:
    """Skip (or, with FASTLOCK_REQUIRE_INSTRUCTION_GATE=1, fail) every gate test, loudly."""
    message = f"INSTRUCTION GATE DID NOT RUN: {why}"
    if os.environ.get(gate.REQUIRE_ENV) == "1":
        summary.lines.append(f"{message} ({gate.REQUIRE_ENV}=1: failed)")
        pytest.fail(f"{message} ({gate.REQUIRE_ENV}=1)", pytrace=False)
    summary.lines.append(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def run(request: pytest.FixtureRequest) -> Run:
    """Measure every path once for the module (children under callgrind, a private server)."""
    summary = Summary()
    request.config.pluginmanager.register(summary, "fastlock-instruction-gate")
    why = gate.unavailable()
    if why:
        _not_run(summary, why)
    try:
        measurement = gate.measure()
    except gate.Unavailable as exc:
        _not_run(summary, str(exc))
    key = gate.toolchain()
    budgets = SETTINGS.get("budgets", {}).get(key)
    summary.lines.append(
        f"instruction gate: {len(measurement.per_op)} paths in {measurement.seconds:.0f} s"
        f" ({measurement.cpu_seconds:.0f} s CPU), toolchain {key}"
    )
    summary.lines += [f"  {name}: {count:,.0f} instructions/op" for name, count in measurement.per_op.items()]
    summary.lines += [f"  {line}" for line in gate.ratio_failures(measurement.per_op, SETTINGS["ratios"])[0]]
    if budgets is None:
        summary.lines.append(
            f"INSTRUCTION BUDGETS NOT CHECKED: no budgets for this toolchain ({key}); ratios still gated."
            " Record them with: python bench/instructions.py --update"
        )
    if measurement.skipped:
        summary.lines.append(f"INSTRUCTION PATHS {gate.NO_CORE}: {', '.join(measurement.skipped)}")
    return Run(measurement, key, budgets)


@pytest.mark.parametrize("name", [path.name for path in gate.GATED])
def test_instruction_budget(run: Run, name: str) -> None:
    """The path's instructions per op are within its budget's tolerance, and not far below it
    (the optional ones, ``gate.OPTIONAL_BUDGETS``: where this toolchain's table has their budgets)."""
    if name in run.measurement.skipped:
        pytest.skip(run.measurement.skipped[name])
    if run.budgets is None:
        pytest.skip(f"no instruction budgets for toolchain {run.toolchain}")
    if name in gate.OPTIONAL_BUDGETS and name not in run.budgets:
        pytest.skip(f"no instruction budget for path {name!r} on toolchain {run.toolchain}")
    failures = gate.budget_failures({name: run.measurement.per_op[name]}, run.budgets, SETTINGS)
    if failures:
        pytest.fail(f"{failures[0]} [toolchain {run.toolchain}]", pytrace=False)


@pytest.mark.parametrize("label", list(SETTINGS["ratios"]))
def test_instruction_ratio(run: Run, label: str) -> None:
    """A same-run ratio between two paths is on the right side of its limit (every toolchain)."""
    top, bottom, _, _ = SETTINGS["ratios"][label]
    for side in (top, bottom):
        if side in run.measurement.skipped:
            pytest.skip(f"{side}: {run.measurement.skipped[side]}")
    lines, failures = gate.ratio_failures(run.measurement.per_op, {label: SETTINGS["ratios"][label]})
    if failures:
        pytest.fail(f"instruction ratio {failures[0]}", pytrace=False)
    assert lines[0].endswith(" ok"), lines[0]


def test_the_gate_measures_on_one_worker(request: pytest.FixtureRequest) -> None:
    """Under xdist's ``--dist loadgroup`` (pyproject's addopts) this module's tests carry their
    group in their node id, so one worker measures, once; a pytest whose node ids drop it
    (9.2 with xdist 3.8: pytest-dev/pytest-xdist#1386) would have every worker run valgrind at once."""
    if os.environ.get("PYTEST_XDIST_WORKER") and request.config.getvalue("loadgroup"):
        assert request.node.nodeid.endswith("@instruction-gate"), (
            f"xdist_group ignored ({request.node.nodeid}): pytest {pytest.__version__}, see pyproject's pin"
        )


def test_budget_verdicts() -> None:
    """Over budget beyond the tolerance fails, far under fails asking to lower, near passes."""
    settings = {"tolerance": 0.02, "stale_below": 0.10}
    budgets = {"a": 1000, "b": 1000, "c": 1000, "d": 1000}
    failures = gate.budget_failures({"a": 1019, "b": 1021, "c": 899, "d": 901, "e": 5}, budgets, settings)
    assert failures == [
        "b: 1,021 instructions/op is over its budget 1,000 by +2.1% (tolerance 2%)",
        "c: 899 instructions/op is 10.1% under its budget 1,000 (more than 10%): lower the budget"
        " (python bench/instructions.py --update)",
        "e: 5 instructions/op, no budget for it on this toolchain",
    ]
    assert gate.budget_failures({"cluster client.call: cython core": 5}, {}, settings) == []  # optional
    wide = {**settings, "loop_tolerance": 0.05}  # the asyncio paths and the shortest one: 5%
    for name in ("encode: cython core", "aio client.call, 100 tasks: cython core"):
        assert gate.budget_failures({name: 1049}, {name: 1000}, wide) == []
        assert gate.budget_failures({name: 1051}, {name: 1000}, wide) != []


def test_write_budgets_replaces_only_its_toolchain(tmp_path: Path) -> None:
    """--update rewrites the table of its toolchain in place and leaves the rest (comments too) alone."""
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(
        '[a]\nx = 1\n\n[instructions.budgets."t1"]\n"p" = 1\n# t2\n[instructions.budgets."t2"]\n"p" = 2\n'
    )
    gate.write_budgets("t1", {"p": 10.4, "q": 20.6}, budgets)
    gate.write_budgets("t3", {"p": 3.0}, budgets)
    assert budgets.read_text() == (
        '[a]\nx = 1\n\n[instructions.budgets."t1"]\n"p" = 10\n"q" = 21\n# t2\n'
        '[instructions.budgets."t2"]\n"p" = 2\n\n[instructions.budgets."t3"]\n"p" = 3\n'
    )
