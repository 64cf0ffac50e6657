"""π̂ (estimate_class_prior): Best Bin Estimation on the model's cross-fitted scores next to the
mean of P(y=0), which is pulled towards 0.5 (the estimators themselves:
test_class_prior_estimators.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from puicl_model import PUICLClassifier
from puicl_model.estimator.prior import best_bin_alpha, prior_cut


def test_best_bin_finds_the_positive_share_when_the_top_bin_is_pure() -> None:
    rng = np.random.default_rng(0)
    positives = rng.uniform(0.6, 1.0, 400)
    unlabeled = np.r_[rng.uniform(0.6, 1.0, 300), rng.uniform(0.0, 0.4, 700)]
    assert best_bin_alpha(positives, unlabeled) == pytest.approx(0.3, abs=0.03)


def test_best_bin_sees_no_negatives_where_the_scores_do_not_differ() -> None:
    rng = np.random.default_rng(1)
    assert best_bin_alpha(rng.random(300), rng.random(600)) > 0.8
    assert best_bin_alpha([0.5], [0.1, 0.2]) == 1.0  # no cut holds two rows of each
    with pytest.raises(ValueError, match="at least one positive and one unlabeled score"):
        best_bin_alpha([], [0.5])


def test_prior_cut_labels_the_pi_hat_share_of_lowest_scores_negative() -> None:
    pool = np.array([0.9, 0.2, 0.6, 0.4, 0.8], dtype=np.float32)
    labels, cut = prior_cut(pool, 0.4)  # round(0.4 * 5) = 2 negatives: 0.2 and 0.4
    np.testing.assert_array_equal(labels, [1, 0, 1, 0, 1])
    assert cut == pytest.approx(0.5)  # halfway between 0.4 and 0.6
    none_negative, cut_none = prior_cut(pool, 0.0)
    assert (none_negative == 1).all() and cut_none == -np.inf
    all_negative, cut_all = prior_cut(pool, 1.0)
    assert (all_negative == 0).all() and cut_all == np.inf


def breast_cancer_task(n_u_pos: int, n_u_neg: int) -> tuple[np.ndarray, np.ndarray]:
    """Breast cancer, benign = positive: 100 labeled positives, then the pool."""
    data = load_breast_cancer()
    rng = np.random.default_rng(0)
    positives = rng.permutation(np.flatnonzero(data.target == 1))
    negatives = rng.permutation(np.flatnonzero(data.target == 0))
    rows = np.r_[positives[: 100 + n_u_pos], negatives[:n_u_neg]]
    s = np.r_[np.ones(100, dtype=int), np.zeros(n_u_pos + n_u_neg, dtype=int)]
    return data.data[rows], s


def test_prior_of_a_mostly_negative_pool_is_not_pulled_towards_one_half() -> None:
    # (with the first bundled checkpoint the pool's mean P(y=0) read 0.76 here; puicl-v1's
    # mean is itself close, and the rule must keep it so)
    X, s = breast_cancer_task(n_u_pos=50, n_u_neg=200)  # π = 0.8
    clf = PUICLClassifier(random_state=0).fit(X, s)
    mean = float(np.mean(clf.predict_proba(X[s == 0])[:, 0]))
    pi_hat = clf.estimate_class_prior()
    assert abs(pi_hat - 0.8) < 0.02
    assert pi_hat >= mean  # the larger of the mean and the best-bin estimate
    assert PUICLClassifier(random_state=0).fit(X, s).estimate_class_prior() == pi_hat


def test_with_few_labeled_positives_the_prior_is_the_mean(small_weights, rng) -> None:
    X = rng.normal(size=(60, 3))
    s = np.r_[np.ones(10, dtype=int), np.zeros(50, dtype=int)]
    clf = PUICLClassifier(weights=small_weights).fit(X, s)
    mean = float(np.mean(clf.predict_proba(X[s == 0])[:, 0]))
    assert clf.estimate_class_prior() == pytest.approx(mean, abs=1e-12)


def test_the_scores_pi_hat_reads_are_public(small_weights, rng) -> None:
    from puicl_model.estimator.prior import class_prior_estimate

    X = rng.normal(size=(90, 3))
    s = np.r_[np.ones(30, dtype=int), np.zeros(60, dtype=int)]
    clf = PUICLClassifier(weights=small_weights, portfolio="none").fit(X, s)
    pool = clf.fitted_pool_proba()
    np.testing.assert_allclose(pool, clf.predict_proba(X[s == 0])[:, 1], atol=1e-12)
    folds = clf.held_out_scores(2)
    assert [len(held) for held, _ in folds] == [15, 15]
    assert all(np.array_equal(fold_pool.shape, pool.shape) for _, fold_pool in folds)
    assert clf.estimate_class_prior(2) == class_prior_estimate(pool, folds)
    # copies: a study that edits them leaves the classifier's own scores as they were
    pool[:] = -1.0
    folds[0][0][:] = -1.0
    assert np.all(clf.fitted_pool_proba() >= 0) and np.all(clf.held_out_scores(2)[0][0] >= 0)
    with pytest.raises(ValueError, match="n_folds must be an integer >= 2"):
        clf.held_out_scores(1)


@pytest.mark.parametrize("portfolio", ["none", "auto"])
def test_a_large_pool_has_its_folds_scored_against_a_sample(small_weights, rng, tmp_path,
                                                            portfolio) -> None:
    """A pool of more than PRIOR_POOL_ROWS rows, scored through shared contexts, has the
    class prior's folds scored against a seeded sample of it: π̂ reads every pool row's
    P(y = 1) and the folds' sample, the same bits after a save."""
    from puicl_model.estimator.prior import PRIOR_POOL_ROWS, class_prior_estimate

    X = rng.normal(size=(2700, 4))
    X[:1300] += 1.0
    s = np.zeros(2700, dtype=int)
    s[:200] = 1
    clf = PUICLClassifier(weights=small_weights, random_state=0, portfolio=portfolio,
                          n_threads=1).fit(X, s)
    assert all(planner.shares_context for planner in clf.planners_)
    folds = clf.held_out_scores()
    assert all(len(pool) == PRIOR_POOL_ROWS < 2500 for _, pool in folds)
    assert sum(len(held) for held, _ in folds) == 200
    pi_hat = clf.estimate_class_prior()
    assert pi_hat == class_prior_estimate(clf.fitted_pool_proba(), folds)
    report = clf.class_prior_report()
    assert report.interval[0] <= pi_hat <= report.interval[1]
    loaded = PUICLClassifier.load(clf.save(tmp_path / "saved"))
    assert loaded.estimate_class_prior() == pi_hat
    assert loaded.class_prior_report() == report
