"""The skip audit (tests/harness/skips.py) refuses reasons that are false or unknown."""

from __future__ import annotations

import tomllib
from pathlib import Path

from harness.skips import false_claim


def test_true_reason_passes() -> None:
    assert false_claim("could not import 'fastlock_no_such_module'") is None


def test_false_reason_fails() -> None:
    assert false_claim("could not import 'json'") == "false on this machine: could not import 'json'"


def test_unknown_reason_fails() -> None:
    why = false_claim("flaky on Tuesdays")
    assert why is not None and why.startswith("no check knows this reason")


def test_the_instruction_gate_reasons_are_checked() -> None:
    assert false_claim("INSTRUCTION GATE DID NOT RUN: sh not on PATH (Debian: ...)") is not None
    budgets = Path(__file__).resolve().parents[1] / "bench" / "budgets.toml"
    known = next(iter(tomllib.loads(budgets.read_text())["instructions"]["budgets"]))
    assert false_claim(f"no instruction budgets for toolchain {known}") is not None
    assert false_claim("no instruction budgets for toolchain cpython-0.0") is None


def test_a_missing_path_budget_is_checked() -> None:
    budgets = Path(__file__).resolve().parents[1] / "bench" / "budgets.toml"
    toolchain, table = next(iter(tomllib.loads(budgets.read_text())["instructions"]["budgets"].items()))
    path = next(iter(table))
    assert false_claim(f"no instruction budget for path {path!r} on toolchain {toolchain}") is not None
    assert false_claim(f"no instruction budget for path 'no such path' on toolchain {toolchain}") is None
