"""The column screen of studies/screened_columns.py: the columns whose means differ most
between the labeled rows and the pool are kept, in their table order."""

from __future__ import annotations

import numpy as np

from studies.screened_columns import screened


def test_the_screen_keeps_the_columns_the_labeled_rows_shift() -> None:
    rng = np.random.default_rng(0)
    labeled = np.arange(600) < 200
    x = rng.normal(size=(600, 40))
    x[labeled, 31] += 1.5
    x[labeled, 4] += 1.0
    x[labeled, 17] -= 0.8  # a shift either way
    x[:, 9] = 3.0  # a constant column: no statistic, never kept before a shifted one
    assert screened(x, labeled, 3).tolist() == [4, 17, 31]
    assert len(screened(x, labeled, 20)) == 20 and 9 not in screened(x, labeled, 3)
