"""The tree-member study (studies/tree_member.py): its variants fit PU bagging's own bags, so that
their scores differ from the shipped member's by the learner alone."""

from __future__ import annotations

import numpy as np

from puicl_model.estimator.learners import BAGGED, CrossFittedLearner
from studies.tree_member import SHIPPED, VARIANTS, VariantLearner


def _rows(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x_labeled = rng.normal(size=(60, 4)) + 0.8
    x_pool = np.vstack([rng.normal(size=(50, 4)) + 0.8, rng.normal(size=(70, 4))])
    return x_labeled, x_pool


def test_the_shipped_variant_gives_the_shipped_members_bits() -> None:
    x_labeled, x_pool = _rows(0)
    shipped = CrossFittedLearner(BAGGED, 123, n_threads=1).fit(x_labeled, x_pool)
    make, bags = VARIANTS[SHIPPED]
    variant = VariantLearner(BAGGED, 123, n_threads=1, make=make).fit(x_labeled, x_pool,
                                                                       bags=bags)
    assert all(np.array_equal(a, b) for a, b in zip(shipped, variant, strict=True))
    # another key draws other bags: the check the study makes on a rebuilt task can fail
    other = VariantLearner(BAGGED, 124, n_threads=1, make=make).fit(x_labeled, x_pool, bags=bags)
    assert not np.array_equal(shipped[1], other[1])


def test_every_variant_ranks_the_pool_with_finite_log_odds() -> None:
    x_labeled, x_pool = _rows(1)
    truth = np.r_[np.ones(50), np.zeros(70)]
    for name, (make, bags) in VARIANTS.items():
        labeled, pool = VariantLearner(BAGGED, 7, n_threads=1, make=make).fit(
            x_labeled, x_pool, bags=bags)
        assert labeled.shape == (60,) and pool.shape == (120,), name
        assert np.isfinite(labeled).all() and np.isfinite(pool).all(), name
        # the positives were shifted: every learner ranks them above the negatives on average
        assert pool[truth == 1].mean() > pool[truth == 0].mean(), name
