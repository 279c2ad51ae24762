"""The skip audit (tests/harness/skips.py) refuses reasons that are false or unknown."""

from __future__ import annotations

from harness.skips import false_claim


def test_true_reason_passes() -> None:
    assert false_claim("could not import 'fastlock_no_such_module'") is None


def test_false_reason_fails() -> None:
    assert false_claim("could not import 'json'") == "false on this machine: could not import 'json'"


def test_unknown_reason_fails() -> None:
    why = false_claim("flaky on Tuesdays")
    assert why is not None and why.startswith("no check knows this reason")
