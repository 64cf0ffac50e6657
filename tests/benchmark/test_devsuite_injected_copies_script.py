"""benchmarks/devsuite_injected_copies.py: the copy it appends is an exact affine copy of the
first numeric column with more than two values, and tables without one are left out."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from benchmark.protocol import PUTask

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "devsuite_injected_copies.py"

# a script, not a module of the package: loaded from its file
_spec = importlib.util.spec_from_file_location("devsuite_injected_copies", SCRIPT)
injected = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(injected)


def _task(x: np.ndarray, categorical: tuple[bool, ...]) -> PUTask:
    n = len(x)
    s = (np.arange(n) < n // 3).astype(np.int8)
    return PUTask("toy", 0, x, s, np.ones(n, np.int8), categorical)


def test_the_copy_is_of_the_first_numeric_column_with_more_than_two_values() -> None:
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.integers(0, 3, 30), rng.integers(0, 2, 30), rng.normal(size=30),
                         rng.normal(size=30)]).astype(float)
    x[4, 2] = np.nan
    task = injected.with_affine_copy(_task(x, (True, False, False, False)))
    # column 0 is categorical, column 1 has two values: column 2 is copied, its gap included
    assert task.categorical == (True, False, False, False, False)
    np.testing.assert_array_equal(task.X[:, :4], x)
    np.testing.assert_array_equal(task.X[:, 4], 1.8 * x[:, 2] + 32.0)


def test_a_table_without_such_a_column_is_left_out() -> None:
    x = np.column_stack([np.arange(30) % 2, np.arange(30) % 5]).astype(float)
    assert injected.with_affine_copy(_task(x, (False, True))) is None
