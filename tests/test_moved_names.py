"""Names that moved keep working from their old homes, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        (
            "fastlock.testing.costs",
            "fastlock.tools.costs",
            ["measure_cost", "command_calls", "Cost", "lifecycle"],
        ),
    ],
)
def test_an_old_module_path_warns_and_hands_out_the_same_object(old: str, new: str, names: list[str]) -> None:
    moved, home = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new}"):
            assert getattr(moved, name) is getattr(home, name)
    with pytest.raises(AttributeError):
        moved.no_such_name  # noqa: B018


def test_the_asyncio_client_has_the_name_of_its_neighbours() -> None:
    import fastlock
    import fastlock.aio

    assert fastlock.aio.AsyncClient is fastlock.aio.Client is fastlock.AsyncClient
    assert "AsyncClient" in fastlock.aio.__all__
