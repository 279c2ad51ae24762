"""The installed configuration is the one this run means to test.

CI sets ``FASTLOCK_EXPECT_IMPL=python`` for its pure-Python pass (``FASTLOCK_NO_EXTENSIONS=1``
build); without it, the default core must be the Cython one whenever the extension is installed.
"""

from __future__ import annotations

import importlib.util
import os

import fastlock


def test_active_core_is_the_expected_one() -> None:
    built = importlib.util.find_spec("fastlock._core") is not None
    expected = os.environ.get("FASTLOCK_EXPECT_IMPL") or ("cython" if built else "python")
    assert fastlock.__impl__ == expected
    assert built == (expected == "cython")
