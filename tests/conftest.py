"""Fixtures every part's tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def read_only_place() -> Path:
    """A directory path where nothing can be created, even by root (sysfs), to test how an
    output the file system refuses is reported; skips where /sys accepts a directory."""
    place = Path("/sys/puicl-test")
    try:
        place.mkdir()
    except OSError:
        return place
    place.rmdir()
    pytest.skip("no read-only place on this machine (/sys accepted a directory)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``heaviest`` run first. The suite runs on two workers (``-n 2 --dist
    worksteal``, DEVELOPERS.md); started last, one of them would keep one worker busy for
    minutes after the other has run out of tests."""
    items.sort(key=lambda item: item.get_closest_marker("heaviest") is None)  # stable
