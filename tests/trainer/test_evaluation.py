"""Validation metrics: AUC with ties, per-task scores, π buckets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from trainer.evaluation import TaskScores, auc_with_ties, score_task, summarize


def test_auc_matches_sklearn_with_many_ties() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        labels = rng.integers(0, 2, size=200)
        scores = rng.integers(0, 5, size=200).astype(float)  # heavy ties
        assert auc_with_ties(scores, labels) == pytest.approx(roc_auc_score(labels, scores))


def test_auc_small_cases_by_hand() -> None:
    assert auc_with_ties([0.1, 0.9], [0, 1]) == 1.0
    assert auc_with_ties([0.9, 0.1], [0, 1]) == 0.0
    assert auc_with_ties([0.5, 0.5, 0.5], [0, 1, 1]) == 0.5  # all tied: ½ per pair
    # positives {0.5, 0.7}, negatives {0.5, 0.2}: pairs 0.5~0.5 (½), 0.5>0.2, 0.7>0.5, 0.7>0.2
    assert auc_with_ties([0.5, 0.7, 0.5, 0.2], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert math.isnan(auc_with_ties([0.1, 0.2], [1, 1]))


def test_score_task_loss_accuracy_and_pi() -> None:
    logits = np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [0.0, -1.0]])
    labels = np.array([0, 1, 1, 1])
    scores = score_task(logits, labels, "7")
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert scores.loss == pytest.approx(-np.mean(log_softmax[np.arange(4), labels]))
    # margin (pos - neg) = [-2, 3, 0, -1]: 0 is not > 0, so rows 0 and 1 right of 4
    assert scores.accuracy == 0.5
    assert scores.pi == 0.25
    assert scores.auc == pytest.approx(roc_auc_score(labels, logits[:, 1] - logits[:, 0]))
    with pytest.raises(ValueError, match=r"expected logits \[n, 2\]"):
        score_task(np.zeros((3, 3)), labels[:3], "7")


def test_summarize_buckets_and_undefined_auc() -> None:
    tasks = [
        TaskScores(1.0, 0.9, 0.8, 0.15, "1"),
        TaskScores(2.0, 0.7, 0.6, 0.25, "1"),
        TaskScores(3.0, math.nan, 1.0, 0.0, "tail"),  # one-class pool: no AUC
        TaskScores(4.0, 0.5, 0.4, 1.0, "tail"),  # π = 1 falls in the last bucket
    ]
    summary = summarize(tasks, (0.0, 0.3, 0.5, 1.0))
    assert summary["loss"] == 2.5
    assert summary["accuracy"] == pytest.approx(0.7)
    assert summary["auc"] == pytest.approx(0.7)
    assert summary["tasks"] == 4 and summary["tasks_with_auc"] == 3
    assert summary["auc_by_pi"] == {"0-0.3": pytest.approx(0.8), "0.3-0.5": None, "0.5-1": 0.5}
    assert summary["auc_by_stage"] == {"1": pytest.approx(0.8), "tail": 0.5}
