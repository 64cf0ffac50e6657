"""The suite's order: the tests marked ``heaviest`` are collected first (``tests/conftest.py``),
so that on two workers neither is left running alone at the end."""

from __future__ import annotations

import pytest


def test_the_heaviest_tests_come_before_every_other(request: pytest.FixtureRequest) -> None:
    heaviest = [item.get_closest_marker("heaviest") is not None
                for item in request.session.items]
    if not any(heaviest):
        pytest.skip("no test marked heaviest was collected in this run")
    first_other = heaviest.index(False) if False in heaviest else len(heaviest)
    assert not any(heaviest[first_other:]), "a heaviest test is collected after a lighter one"
