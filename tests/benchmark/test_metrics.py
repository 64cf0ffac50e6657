"""Metrics against hand-computed cases, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.metrics import accuracy, auc_mann_whitney, f1_positive


def test_auc_hand_computed_without_ties():
    # positives 0.9, 0.4; negatives 0.5, 0.1 -> pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1) = 3/4
    assert auc_mann_whitney([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == pytest.approx(0.75)


def test_auc_ties_count_half():
    # positives 0.5, 0.7; negatives 0.5, 0.2:
    # (0.5 vs 0.5 tie = 0.5) + (0.5 > 0.2 = 1) + (0.7 > 0.5 = 1) + (0.7 > 0.2 = 1) = 3.5 / 4
    assert auc_mann_whitney([1, 0, 1, 0], [0.5, 0.5, 0.7, 0.2]) == pytest.approx(0.875)


def test_auc_all_scores_equal_is_half_and_inverted_is_zero():
    assert auc_mann_whitney([1, 0, 1, 0, 0], [3.0] * 5) == pytest.approx(0.5)
    assert auc_mann_whitney([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9]) == 0.0


def test_auc_matches_brute_force_on_random_scores_with_many_ties():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200)
    r = rng.integers(0, 7, 200).astype(float)  # heavy ties
    pos, neg = r[y == 1], r[y == 0]
    brute = ((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean()
    assert auc_mann_whitney(y, r) == pytest.approx(brute, abs=1e-12)


def test_auc_single_class_is_nan_and_nan_scores_rejected():
    assert np.isnan(auc_mann_whitney([1, 1], [0.2, 0.3]))
    with pytest.raises(ValueError, match="NaN"):
        auc_mann_whitney([1, 0], [np.nan, 0.3])


def test_accuracy_and_f1_hand_computed():
    y = [1, 1, 1, 0, 0]
    pred = [1, 0, 1, 1, 0]  # TP=2, FN=1, FP=1, TN=1
    assert accuracy(y, pred) == pytest.approx(3 / 5)
    assert f1_positive(y, pred) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_f1_is_zero_without_true_positive():
    assert f1_positive([1, 1, 0], [0, 0, 0]) == 0.0  # nothing predicted positive
    assert f1_positive([0, 0], [1, 1]) == 0.0  # no positive at all


def test_length_mismatch_and_bad_labels_are_errors():
    with pytest.raises(ValueError, match="3 entries but labels has 2"):
        accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="only 0"):
        f1_positive([2, 0], [1, 0])
