"""Evaluation metrics of paper §6.1, computed on the unlabeled rows only.

* AUC: the Mann–Whitney statistic, (1 / (n⁺ n⁻)) Σ_{i∈+} Σ_{j∈−} [1{r_i > r_j} + ½ 1{r_i = r_j}],
  computed from average ranks (ties count ½) in O(n log n).
* Accuracy and F1 of the positive class from hard labels (1 = positive). F1 is 0 when there is
  no true positive (no predicted or no actual positive), as scikit-learn's ``zero_division=0``.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def _check(y_true: np.ndarray, other: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y_true).ravel()
    o = np.asarray(other).ravel()
    if y.shape != o.shape:
        raise ValueError(f"y_true has {y.size} entries but {what} has {o.size}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("y_true must hold only 0 (negative) and 1 (positive)")
    return y.astype(np.int8), o


def auc_mann_whitney(y_true: np.ndarray, scores: np.ndarray) -> float:
    """AUC of ``scores`` (higher = more positive); NaN if one class is absent."""
    y, r = _check(y_true, scores, "scores")
    r = r.astype(np.float64)
    if np.isnan(r).any():
        raise ValueError("scores contain NaN")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(r, method="average")
    u_statistic = ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u_statistic / (n_pos * n_neg))


def accuracy(y_true: np.ndarray, labels: np.ndarray) -> float:
    y, p = _check(y_true, labels, "labels")
    if y.size == 0:
        return float("nan")
    return float(np.mean(y == p.astype(np.int8)))


def f1_positive(y_true: np.ndarray, labels: np.ndarray) -> float:
    """F1 of class 1: 2·TP / (2·TP + FP + FN); 0 when TP = 0."""
    y, p = _check(y_true, labels, "labels")
    p = p.astype(np.int8)
    tp = int(np.sum((y == 1) & (p == 1)))
    fp = int(np.sum((y == 0) & (p == 1)))
    fn = int(np.sum((y == 1) & (p == 0)))
    if tp == 0:
        return 0.0
    return float(2 * tp / (2 * tp + fp + fn))
