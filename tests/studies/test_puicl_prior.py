"""The class-prior study's rules (studies/puicl_prior.py) and its kept scores: the adjusted
mean recovers π where the model separates the classes but is soft, the classifier's rule is
the script's, every rule is computed per fold count, and the estimates recomputed from
``--scores-out`` files equal the ones computed when scoring."""

from __future__ import annotations

import numpy as np
import pytest

from studies import puicl_prior


def _soft_separable(pi: float, n_pool: int = 800, n_held: int = 400, seed: int = 0):
    """P(y=1) of a model that ranks perfectly but is unsure of positives: [0.55, 0.9] for
    positives, [0.05, 0.15] for negatives; two folds of held-out positives of the same law."""
    rng = np.random.default_rng(seed)
    n_neg = round(pi * n_pool)
    pool = np.r_[rng.uniform(0.55, 0.9, n_pool - n_neg), rng.uniform(0.05, 0.15, n_neg)]
    y_pool = np.r_[np.ones(n_pool - n_neg, int), np.zeros(n_neg, int)]
    halves = [(rng.uniform(0.55, 0.9, n_held // 2), pool) for _ in range(2)]
    return pool, halves, y_pool


@pytest.mark.parametrize("pi", [0.2, 0.5, 0.8])
def test_adjusted_mean_recovers_pi_where_the_plain_mean_is_pulled_to_one_half(pi) -> None:
    pool, halves, _ = _soft_separable(pi)
    adjusted = puicl_prior.ESTIMATORS["adjusted_mean"](pool, halves)
    mean = 1.0 - float(np.mean(pool))
    symmetric = puicl_prior.ESTIMATORS["symmetric"](pool, halves)
    assert abs(adjusted - pi) < 0.03
    # the fixture is the case the rule is for: away from π = 0.8, where the negatives dominate
    # the mean, the plain mean and the symmetric inversion (which assumes the model is as sure
    # of negatives as of positives) both miss
    if pi < 0.8:
        assert abs(mean - pi) > 0.05 and abs(symmetric - pi) > 0.05


def test_the_script_computes_the_classifier_rule_per_fold_count() -> None:
    from puicl_model.estimator.prior import class_prior_estimate

    pool, halves, y_pool = _soft_separable(0.2)
    three = [(held[:60], part) for held, part in halves] + [(halves[0][0][60:], pool)]
    result = puicl_prior.row({"dataset": "soft", "repetition": 0, "target_pi": 0.2}, pool,
                             {2: halves, 3: three}, y_pool, legacy=halves)
    assert result["estimate_class_prior/2"] == class_prior_estimate(pool, halves)
    assert result["estimate_class_prior/3"] == class_prior_estimate(pool, three)
    assert result["legacy"] == max(result["mean"], result["best_bin/2"])
    assert {f"dedpul/{k}" for k in (2, 3)} <= set(result)


def test_kept_scores_give_the_same_row(tmp_path) -> None:
    pool, halves, y_pool = _soft_separable(0.5, seed=3)
    identity = {"dataset": "synthetic-tail", "repetition": 7, "target_pi": "stage tail"}
    expected = puicl_prior.row(identity, pool, {2: halves}, y_pool, legacy=halves)
    np.savez_compressed(tmp_path / "task.npz", pool=pool, y_pool=y_pool,
                        K2_held0=halves[0][0], K2_pool0=halves[0][1], K2_held1=halves[1][0],
                        K2_pool1=halves[1][1], held0=halves[0][0], pool0=halves[0][1],
                        held1=halves[1][0], pool1=halves[1][1],
                        **{k: np.asarray(v) for k, v in identity.items()})
    assert puicl_prior.rescored_row(tmp_path / "task.npz") == expected


def test_row_scores_both_decision_thresholds() -> None:
    pool, halves, y_pool = _soft_separable(0.2)  # P(y=1) > 0.5 for every positive only
    result = puicl_prior.row({"dataset": "soft", "repetition": 0, "target_pi": 0.2}, pool,
                             {2: halves}, y_pool, default_folds=2)
    assert result["accuracy@0.5"] == 1.0 and result["f1@0.5"] == 1.0
    # the prior cut labels the π̂ share negative: it is exact only where π̂ is
    pi_hat = result["estimate_class_prior/2"]
    negatives = round(pi_hat * len(pool))
    assert result["accuracy@prior"] == pytest.approx(1 - abs(negatives - 160) / 800)


def test_scores_kept_before_cross_fitting_still_give_a_row(tmp_path) -> None:
    pool, halves, y_pool = _soft_separable(0.5, seed=4)
    identity = {"dataset": "old", "repetition": 0, "target_pi": 0.5}
    np.savez_compressed(tmp_path / "old.npz", pool=pool, y_pool=y_pool, held0=halves[0][0],
                        pool0=halves[0][1], held1=halves[1][0], pool1=halves[1][1],
                        **{k: np.asarray(v) for k, v in identity.items()})
    result = puicl_prior.rescored_row(tmp_path / "old.npz")
    assert result["legacy"] == max(result["mean"], puicl_prior.best_bin_estimate(halves))
    assert not any("/" in key for key in result)
