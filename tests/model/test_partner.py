"""The partner and its blend (puicl_model.partner): the choice on held-out positives, the
probabilities it keeps, and how the classifier runs it."""

from __future__ import annotations

import numpy as np
import pytest

from puicl_model import PUICLClassifier
from puicl_model.partner import (
    BLEND_WEIGHTS,
    MAX_HELD_OUT,
    MIN_LABELED_FOR_PARTNER,
    choose_blend,
    held_out_rows,
)


def _scores(rng: np.random.Generator, signal: float, n: int, positive: bool) -> np.ndarray:
    """Probabilities whose log-odds separate positives from negatives by ``signal``."""
    z = rng.normal(size=n) + (signal if positive else 0.0)
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("informative, expected", [("model", 1.0), ("partner", 0.0)])
def test_the_blend_follows_the_scorer_that_ranks_held_out_positives_above_the_pool(
    informative: str, expected: float
) -> None:
    rng = np.random.default_rng(0)
    n_pos, n_neg, n_held = 600, 600, 400
    # the pool: positives then negatives; held-out positives drawn like the pool's positives
    good_pool = np.r_[_scores(rng, 3.0, n_pos, True), _scores(rng, 3.0, n_neg, False)]
    good_held = _scores(rng, 3.0, n_held, True)
    noise_pool, noise_held = rng.random(n_pos + n_neg), rng.random(n_held)
    if informative == "model":
        blend = choose_blend(good_pool, good_held, noise_pool - 0.5, noise_held - 0.5)
    else:
        logit = np.log(good_pool / (1 - good_pool))
        held_logit = np.log(good_held / (1 - good_held))
        blend = choose_blend(noise_pool, noise_held, logit, held_logit)
    assert blend.weight == expected
    assert set(blend.held_out_auc) == set(BLEND_WEIGHTS)
    assert blend.held_out_auc[expected] == max(blend.held_out_auc.values())


def test_blended_probabilities_keep_the_models_distribution_over_the_pool() -> None:
    rng = np.random.default_rng(1)
    model_pool, model_held = rng.random(500), rng.random(100)
    partner_pool = rng.normal(size=500) + 3.0 * (model_pool > 2.0)  # unrelated to the model
    partner_held = rng.normal(size=100) + 1.0
    blend = choose_blend(model_pool, model_held, partner_pool, partner_held)
    assert blend.weight < 1.0
    proba = blend.proba(model_pool, partner_pool)
    # the same probabilities, reassigned in the blend's order
    assert np.allclose(np.sort(proba), np.sort(model_pool))
    order = np.argsort(blend.score(model_pool, partner_pool), kind="stable")
    assert np.all(np.diff(proba[order]) >= 0)
    # weight 1: the model's own probabilities, bit for bit
    alone = type(blend)(1.0, {}, 0.0, 1.0, 0.0, 1.0, np.empty(0), np.empty(0))
    assert np.array_equal(alone.proba(model_pool, partner_pool), model_pool)


def test_held_out_rows_are_keyed_by_the_seed() -> None:
    first = held_out_rows(700, 350, entropy=5)
    assert first.sum() == 350
    assert np.array_equal(first, held_out_rows(700, 350, entropy=5))
    assert not np.array_equal(first, held_out_rows(700, 350, entropy=6))


def _large_table(rng: np.random.Generator, n_labeled: int, n_pool: int, d: int = 5):
    x_labeled = rng.normal(size=(n_labeled, d))
    x_pool = rng.normal(size=(n_pool, d))
    negatives = rng.random(n_pool) < 0.5
    x_pool[negatives, :2] += 1.0
    return np.vstack([x_labeled, x_pool]), np.r_[np.ones(n_labeled), np.zeros(n_pool)]


def test_below_the_threshold_auto_is_the_model_alone_bit_for_bit(small_weights, rng) -> None:
    X, s = _large_table(rng, MIN_LABELED_FOR_PARTNER - 1, 700)
    auto = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    alone = PUICLClassifier(weights=small_weights, device="cpu", partner="none").fit(X, s)
    assert auto.partner_ == "none" and auto.n_held_out_ == 0
    assert np.array_equal(auto.predict_proba(X[s == 0]), alone.predict_proba(X[s == 0]))
    assert auto.blend_weight_ == 1.0


def test_large_tables_hold_positives_out_and_blend(small_weights, rng) -> None:
    n_labeled = MIN_LABELED_FOR_PARTNER + 40
    X, s = _large_table(rng, n_labeled, 700)
    clf = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    assert clf.partner_ == "logistic"
    assert clf.n_held_out_ == min(n_labeled // 2, MAX_HELD_OUT)
    # the passes' context holds the other labeled rows; the held-out ones are scored with the
    # pool, so they are the one fold the class prior reads, at no extra pass
    assert len(clf.x_labeled_) == n_labeled - clf.n_held_out_
    pool = clf.predict_proba(X[s == 0])
    assert pool.shape == (700, 2) and np.all((pool >= 0) & (pool <= 1))
    passes = clf.n_passes_
    folds = clf._held_out_scores()
    assert len(folds) == 1 and len(folds[0][0]) == clf.n_held_out_
    assert 0.0 <= clf.estimate_class_prior() <= 1.0
    assert clf.n_passes_ == passes
    assert clf.blend_weight_ in BLEND_WEIGHTS
    assert np.array_equal(clf.predict(X[s == 0]), (pool[:, 1] > 0.5).astype(np.int64))
    again = PUICLClassifier(weights=small_weights, device="cpu", random_state=3).fit(X, s)
    assert np.array_equal(again.predict_proba(X[s == 0]), pool)
    # a new row is read off the same blend: inside the range of the pool's probabilities
    new = clf.predict_proba(X[s == 0][:7] + 1e-3)[:, 1]
    if clf.blend_weight_ < 1.0:
        assert np.all((new >= pool[:, 1].min()) & (new <= pool[:, 1].max()))
    # the model alone on the same table: every labeled row is context
    alone = PUICLClassifier(weights=small_weights, device="cpu", random_state=3,
                            partner="none").fit(X, s)
    assert alone.n_held_out_ == 0 and len(alone.x_labeled_) == n_labeled


def test_a_tiny_pool_is_scored_by_the_model_alone(small_weights, rng) -> None:
    X, s = _large_table(rng, MIN_LABELED_FOR_PARTNER, 40)
    with pytest.warns(UserWarning, match="more rows labeled"):
        clf = PUICLClassifier(weights=small_weights, device="cpu").fit(X, s)
    assert clf.partner_ == "none"
    assert clf.predict_proba(X[s == 0]).shape == (40, 2)


def test_a_bad_partner_setting_is_named(small_weights, rng) -> None:
    X, s = _large_table(rng, 20, 30)
    with pytest.raises(ValueError, match="partner"):
        PUICLClassifier(weights=small_weights, partner="boosted").fit(X, s)
