"""The context draws of studies/shared_context.py and the pool draws of
studies/pool_composition.py: what each study's figures rest on."""

from __future__ import annotations

import numpy as np
import pytest

from studies.pool_composition import POOL, draw_pool
from studies.shared_context import context_rows


def test_an_enriched_context_takes_half_from_the_least_positive_third() -> None:
    rng = np.random.default_rng(0)
    least_positive = rng.permutation(3000)
    context = context_rows("enriched", np.random.default_rng(1), 3000, 1000, least_positive)
    assert len(context) == len(np.unique(context)) == 1000
    from_low = np.isin(context, least_positive[:1000])
    assert from_low[:500].all()  # the first half comes from the least positive third
    # the rest is drawn from the 2,500 rows left, 500 of them in that third: about a fifth
    assert 0.15 < from_low[500:].mean() < 0.25


def test_a_random_context_ignores_the_first_score() -> None:
    a = context_rows("random", np.random.default_rng(1), 3000, 1000, np.arange(3000))
    b = context_rows("random", np.random.default_rng(1), 3000, 1000, np.arange(3000)[::-1])
    assert np.array_equal(a, b) and len(np.unique(a)) == 1000


@pytest.mark.parametrize(("share", "negatives", "expected"), [
    (0.2, 5000, 200), (0.5, 5000, 500), (0.5, 300, 300),  # as many as there are, at most
])
def test_a_pool_gets_the_share_of_negatives_asked_for(share, negatives, expected) -> None:
    positives, negative_rows = np.arange(10_000), np.arange(10_000, 10_000 + negatives)
    pool = draw_pool(np.random.default_rng(0), positives, negative_rows, share)
    assert len(pool) == len(np.unique(pool)) == POOL
    assert np.isin(pool, negative_rows).sum() == expected
