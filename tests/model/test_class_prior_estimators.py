"""The class-prior estimators of puicl_model.estimator.prior on synthetic score mixtures of known π,
and
the cross-fitted scores they read.

Scores are drawn as a model's P(y=1) would be: held-out positives from Beta(a, b), the pool a
mixture of positives from the same Beta and negatives from another, with a known negative
share π. Where the two Betas barely overlap BBE recovers π; where they overlap everywhere it
falls short of π, by more the more they overlap (docs/classifier_measurements.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from puicl_model import PUICLClassifier
from puicl_model.estimator.prior import (
    best_bin_alpha,
    best_bin_estimate,
    class_prior_estimate,
    cross_fitted_scores,
    fold_of,
    mean_estimate,
)
from tests.score_mixtures import IDENTICAL, OVERLAPPING, SEPARATED, errors, mixture


@pytest.mark.parametrize("pi", [0.2, 0.5, 0.8])
def test_separated_scores_give_pi_within_three_points(pi: float) -> None:
    # 10 draws: the median miss is at most 0.02 (measured)
    miss = errors(best_bin_alpha, pi, SEPARATED, seeds=range(10))
    assert np.median(np.abs(miss)) < 0.03
    assert abs(miss.mean()) < 0.05


def test_overlapping_scores_fall_short_of_pi_and_more_so_the_more_they_overlap() -> None:
    estimator = best_bin_alpha
    for pi in (0.5, 0.8):
        separated = errors(estimator, pi, SEPARATED).mean()
        overlapping = errors(estimator, pi, OVERLAPPING).mean()
        identical = errors(estimator, pi, IDENTICAL).mean()
        # an upper bound of the positive share: π̂ falls short, never overshoots much
        assert overlapping < -0.05 and overlapping < separated - 0.05
        # nothing separates the pool's positives from its negatives: π̂ ≈ 0
        assert identical == pytest.approx(-pi, abs=0.06)


def test_fold_estimates_average_the_folds_and_the_rule_needs_enough_positives() -> None:
    folds = [mixture(0.5, SEPARATED, seed) for seed in (0, 1)]
    assert best_bin_estimate(folds) == pytest.approx(
        np.mean([1 - best_bin_alpha(h, p) for h, p in folds]))
    pool = folds[0][1]
    few = [(held[:5], part) for held, part in folds]  # 10 < MIN_LABELED_FOR_ESTIMATES
    assert class_prior_estimate(pool, few) == mean_estimate(pool)
    assert class_prior_estimate(pool, None) == mean_estimate(pool)


def test_folds_are_near_equal_and_keyed_by_the_seed_and_the_count() -> None:
    fold = fold_of(101, 3, entropy=7)
    assert sorted(np.bincount(fold)) == [33, 34, 34]
    np.testing.assert_array_equal(fold, fold_of(101, 3, entropy=7))
    assert not np.array_equal(fold, fold_of(101, 3, entropy=8))
    with pytest.raises(ValueError, match="n_folds must be from 2"):
        fold_of(10, 6, entropy=0)


def test_cross_fitted_scores_score_each_fold_with_the_pool(small_weights, rng) -> None:
    X = rng.normal(size=(90, 4))
    s = np.r_[np.ones(30, dtype=int), np.zeros(60, dtype=int)]
    clf = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    folds = cross_fitted_scores(clf.scorer_, clf.planners_, clf.views_, 3)
    assert [len(held) for held, _ in folds] == [10, 10, 10]
    assert all(pool.shape == (60,) for _, pool in folds)
    # the pool is scored next to fewer labeled rows, and with the fold among it: close to,
    # not equal to, its own scores; predict_proba is unchanged by asking for π̂
    before = clf.predict_proba(X[s == 0])
    pi_hat = clf.estimate_class_prior(3)
    assert 0.0 <= pi_hat <= 1.0 and clf.estimate_class_prior(3) == pi_hat
    np.testing.assert_array_equal(clf.predict_proba(X[s == 0]), before)
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        clf.estimate_class_prior(1)
    again = PUICLClassifier(weights=small_weights, random_state=0).fit(X, s)
    repeated = cross_fitted_scores(again.scorer_, again.planners_, again.views_, 3)
    for (held, pool), (held2, pool2) in zip(folds, repeated, strict=True):
        np.testing.assert_array_equal(held, held2)
        np.testing.assert_array_equal(pool, pool2)
