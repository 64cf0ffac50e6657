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
